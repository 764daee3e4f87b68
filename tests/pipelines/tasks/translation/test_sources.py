"""The translation data stage: ddtp / folder / wmt14 sources, manifest, atomic writes, input errors."""

import os
import socket
import threading
import time

import pytest

from keras_transformer import files as files_module
from pipelines import corpus as corpus_module
from pipelines.config import ConfigError, load_config
from pipelines.corpus import MANIFEST, SPLITS, Corpus, require_network
from pipelines.tasks.translation import ddtp
from pipelines.tasks.translation import sources as download_module
from pipelines.tasks.translation.cleaning import REASONS
from pipelines.tasks.translation.sources import SourceConfig, find_folder_files, prepare_corpus
from pipelines.textfiles import DataError


def test_ddtp_download_matches_shipped_corpus(ddtp_corpus):
    shipped = ddtp.shipped_corpus("en-de")
    assert ddtp_corpus.manifest["source"] == "ddtp"
    assert (ddtp_corpus.source_lang, ddtp_corpus.target_lang) == ("en", "de")
    assert ddtp_corpus.counts == shipped.counts
    for split in SPLITS:
        for lang in ("en", "de"):
            assert ddtp_corpus.path(split, lang).name == f"{split}.{lang}"  # plain text
            assert ddtp_corpus.file_sha256(split, lang) == shipped.file_sha256(split, lang)
        counts = ddtp_corpus.manifest["cleaning"][split]
        assert set(REASONS) <= set(counts) and counts["kept"] == shipped.counts[split]
    assert ddtp_corpus.manifest["provenance"]["build_cleaning"]["all"]["duplicate"] > 0
    assert next(ddtp_corpus.pairs("train")) == next(shipped.pairs("train"))


def test_ddtp_reverse_direction(tmp_path, ddtp_corpus):
    out = prepare_corpus(SourceConfig(language_pair="de-en", output_dir=str(tmp_path / "de-en")))
    corpus = Corpus.load(out)
    assert (corpus.source_lang, corpus.target_lang) == ("de", "en")
    assert corpus.file_sha256("test", "de") == ddtp_corpus.file_sha256("test", "de")
    de, en = next(corpus.pairs("test"))
    assert (en, de) == next(ddtp_corpus.pairs("test"))


def test_rerun_skips_verified_and_redoes_corrupted(tmp_path, monkeypatch):
    config = SourceConfig(language_pair="en-fr", output_dir=str(tmp_path / "c"))
    out = prepare_corpus(config)
    writes = []
    monkeypatch.setattr(download_module, "write_corpus",
                        lambda *a, **k: writes.append(1) or corpus_module.write_corpus(*a, **k))
    assert prepare_corpus(config) == out and writes == []  # verified manifest: nothing redone
    # A truncated file (e.g. disk full) fails verification, and a rerun repairs it.
    path = out / "train.fr"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(DataError, match="sha256 .* does not match"):
        Corpus.load(out)
    prepare_corpus(config)
    assert writes == [1]
    Corpus.load(out)
    # Other settings: redone as well.
    config.cleaning.max_words = 100
    prepare_corpus(config)
    assert writes == [1, 1]
    assert Corpus.load(out).manifest["cleaning"]["train"]["too_long"] > 0


def test_killed_write_leaves_nothing_trusted(tmp_path, monkeypatch):
    """A write killed halfway leaves no manifest and no half file; a rerun starts over."""
    out = tmp_path / "c"
    config = SourceConfig(output_dir=str(out))
    calls = []
    real_fsync = os.fsync

    def dying_fsync(fd):
        calls.append(fd)
        if len(calls) == 3:  # while the third file is being written
            raise KeyboardInterrupt("killed")
        real_fsync(fd)

    monkeypatch.setattr(files_module.os, "fsync", dying_fsync)
    with pytest.raises(KeyboardInterrupt):
        prepare_corpus(config)
    assert not (out / MANIFEST).exists()
    assert not list(out.glob(".*.tmp"))  # the half-written temporary file is gone
    assert sorted(p.name for p in out.iterdir()) == ["train.de", "train.en"]  # complete files
    with pytest.raises(DataError, match="no manifest"):
        Corpus.load(out)
    monkeypatch.setattr(files_module.os, "fsync", real_fsync)
    Corpus.load(prepare_corpus(config))


# --- folder source -----------------------------------------------------------------------------

def _write(path, lines, encoding="utf-8"):
    path.write_bytes("".join(f"{line}\n" for line in lines).encode(encoding))


def test_folder_source_cleans_with_counts(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    train_en = ["Hello world", "", "Hello world", "a " * 300, "one", "The cat sleeps"]
    train_de = ["Hallo Welt", "leer", "Hallo Welt", "b " * 300, "eins zwei drei vier",
                "Die Katze schläft"]
    _write(folder / "mine.train.en", train_en)
    _write(folder / "mine.train.de", train_de)
    _write(folder / "mine.dev.en", ["Good day", "Good day"])
    _write(folder / "mine.dev.de", ["Guten Tag", "Guten Tag"])
    _write(folder / "mine.test.en", ["Thank you"])
    _write(folder / "mine.test.de", ["Danke\u00a0schön"])
    _write(folder / "README", ["not a corpus file"])
    out = prepare_corpus(SourceConfig(source="folder", folder=str(folder),
                                  output_dir=str(tmp_path / "out")))
    corpus = Corpus.load(out)
    assert list(corpus.pairs("train")) == [("Hello world", "Hallo Welt"),
                                           ("The cat sleeps", "Die Katze schläft")]
    assert corpus.manifest["cleaning"]["train"] == {
        "input": 6, "empty": 1, "too_long": 1, "length_ratio": 1, "duplicate": 1, "kept": 2}
    # Held-out splits are normalized but not filtered: duplicates stay.
    assert list(corpus.pairs("validation")) == [("Good day", "Guten Tag")] * 2
    assert list(corpus.pairs("test")) == [("Thank you", "Danke schön")]


def test_folder_translatefolder_layout_and_derived_splits(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    en = [f"sentence number {i}" for i in range(300)]
    fr = [f"phrase numéro {i}" for i in range(300)]
    _write(folder / "en.train.txt", en)
    _write(folder / "fr.train.txt", fr)
    assert set(find_folder_files(folder, "en", "fr")) == {"train"}
    corpus = Corpus.load(prepare_corpus(SourceConfig(source="folder", folder=str(folder),
                                                 language_pair="en-fr",
                                                 output_dir=str(tmp_path / "out"))))
    assert sum(corpus.counts.values()) == 300
    assert all(corpus.counts[split] > 0 for split in SPLITS)
    held_out = set(corpus.lines("validation", "en")) | set(corpus.lines("test", "en"))
    assert not held_out & set(corpus.lines("train", "en"))


def test_folder_mismatched_line_counts(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    _write(folder / "c.train.en", ["a", "b", "c"])
    _write(folder / "c.train.de", ["a", "b"])
    with pytest.raises(DataError) as err:
        prepare_corpus(SourceConfig(source="folder", folder=str(folder),
                                output_dir=str(tmp_path / "out")))
    assert f"{folder / 'c.train.en'} has 3 lines" in str(err.value)
    assert f"{folder / 'c.train.de'} has 2 lines" in str(err.value)
    assert not (tmp_path / "out" / MANIFEST).exists()


def test_folder_undecodable_utf8(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    _write(folder / "c.train.en", ["a", "b", "c"])
    _write(folder / "c.train.de", ["a", "Größe", "c"], encoding="latin-1")
    with pytest.raises(DataError, match=rf"{folder / 'c.train.de'}:2: not valid UTF-8"):
        prepare_corpus(SourceConfig(source="folder", folder=str(folder),
                                output_dir=str(tmp_path / "out")))


@pytest.mark.parametrize("test_lines", [[], ["", "  "]], ids=["empty-file", "blank-lines"])
def test_folder_empty_split(tmp_path, test_lines):
    folder = tmp_path / "in"
    folder.mkdir()
    for split in ("train", "validation"):
        _write(folder / f"c.{split}.en", ["Hello"])
        _write(folder / f"c.{split}.de", ["Hallo"])
    _write(folder / "c.test.en", test_lines)
    _write(folder / "c.test.de", test_lines)
    with pytest.raises(DataError, match=r"split 'test' is empty.*c\.test\.en"):
        prepare_corpus(SourceConfig(source="folder", folder=str(folder),
                                output_dir=str(tmp_path / "out")))


def test_folder_layout_errors(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    with pytest.raises(DataError, match="no parallel files for en-de"):
        find_folder_files(folder, "en", "de")
    _write(folder / "a.train.en", ["x"])
    with pytest.raises(DataError, match="has no de counterpart"):
        find_folder_files(folder, "en", "de")
    _write(folder / "a.train.de", ["x"])
    _write(folder / "b.train.en", ["x"])
    _write(folder / "b.train.de", ["x"])
    with pytest.raises(DataError, match="several corpora"):
        find_folder_files(folder, "en", "de")
    assert find_folder_files(folder, "en", "de", name="b")["train"][0].name == "b.train.en"


# --- wmt14 ---------------------------------------------------------------------------------------

def test_wmt14_offline_fails_fast_with_clear_message(tmp_path, monkeypatch):
    """Real tfds builder and URL list; the network itself is cut at the socket."""
    def offline(*args, **kwargs):
        raise OSError(101, "Network is unreachable")

    monkeypatch.setattr(socket, "create_connection", offline)
    config = SourceConfig(source="wmt14", language_pair="en-de",
                            output_dir=str(tmp_path / "out"), tfds_data_dir=str(tmp_path / "tfds"))
    start = time.monotonic()
    with pytest.raises(ConnectionError, match=r"cannot download wmt14_translate: .*statmt\.org "
                                              r"is unreachable .*internet access"):
        prepare_corpus(config)
    assert time.monotonic() - start < 10
    assert not (tmp_path / "out" / MANIFEST).exists()


def test_wmt14_urls_and_conversion(tmp_path, monkeypatch):
    """Past the network boundary with tfds' mock data: language mapping and the layout."""
    import tensorflow_datasets as tfds

    config = SourceConfig(source="wmt14", language_pair="en-fr", max_examples=7,
                            output_dir=str(tmp_path / "out"))
    urls = download_module.wmt14_urls(download_module.wmt14_builder(config))
    assert "http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz" in urls
    assert any("giga-fren" in url for url in urls)  # the fr-en training data of the paper
    probed = []
    monkeypatch.setattr(download_module, "require_network",
                        lambda u, **kwargs: probed.extend(u))
    with tfds.testing.mock_data(num_examples=20):
        corpus = Corpus.load(prepare_corpus(config))
    assert probed == urls
    assert (corpus.source_lang, corpus.target_lang) == ("en", "fr")
    for split in SPLITS:
        assert corpus.manifest["cleaning"][split]["input"] == 7
        assert 0 < corpus.counts[split] <= 7
    with pytest.raises(DataError, match="WMT14 in tensorflow-datasets pairs English"):
        download_module.wmt14_builder(SourceConfig(source="wmt14", language_pair="de-fr"))


def test_require_network_times_out_on_a_silent_server():
    """A server that accepts connections but never answers: error after the timeout."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        start = time.monotonic()
        with pytest.raises(ConnectionError, match="127.0.0.1.*unreachable"):
            require_network([f"http://127.0.0.1:{port}/file.tgz"], timeout=0.5)
        assert time.monotonic() - start < 5
    finally:
        server.close()


def test_require_network_accepts_any_http_answer():
    """Reachability only: a 404 from a live server is not an error."""
    import http.server

    requests = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 (the http.server API)
            requests.append(("HEAD", self.path))
            self.send_error(404)

        def do_GET(self):  # noqa: N802
            requests.append(("GET", self.path))
            self.send_error(404)

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.handle_request, daemon=True)
    thread.start()
    try:
        require_network([f"http://127.0.0.1:{httpd.server_port}/missing"], timeout=5)
    finally:
        thread.join(5)
        httpd.server_close()
    # The check really asked this server (a refused or unsent request would leave this empty).
    assert [path for _, path in requests] == ["/missing"]


def test_source_config_yaml(tmp_path):
    path = tmp_path / "stages.yaml"
    path.write_text("data:\n  source: folder\n  folder: /data/mine\n  language_pair: en-fr\n"
                    "  cleaning: {max_words: 80, filter_splits: [train]}\n", encoding="utf-8")
    config = load_config(SourceConfig, path, section="data")
    assert config.cleaning.max_words == 80 and config.cleaning.filter_splits == ("train",)
    assert config.resolved_output_dir().as_posix() == "data/folder-en-fr"
    with pytest.raises(ConfigError, match="source must be one of"):
        load_config(SourceConfig, _yaml(tmp_path, "source: europarl\n"))
    with pytest.raises(ConfigError, match="needs folder"):
        load_config(SourceConfig, _yaml(tmp_path, "source: folder\n"))
    with pytest.raises(ConfigError, match="language_pair"):
        load_config(SourceConfig, _yaml(tmp_path, "language_pair: english-german-x\n"))


def _yaml(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    return path
