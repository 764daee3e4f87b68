"""The DDTP builder and the shipped corpora: checksums, bit-identical rebuild, split hygiene."""

import bz2
import hashlib
import lzma
import socket

import pytest

from pipelines.corpus import SPLITS, Corpus, sha256_file
from pipelines.tasks.translation import ddtp
from pipelines.tasks.translation.cleaning import DataError

# Measured on the bookworm files; the rebuild test pins them exactly through the checksums.
EXPECTED_COUNTS = {
    # test_unseen: whole packages held out of what was train (30,053 and 45,909 before it).
    "en-de": {"train": 28891, "validation": 1272, "test": 1290, "test_unseen": 1162},
    "en-fr": {"train": 43912, "validation": 2008, "test": 2006, "test_unseen": 1997},
}


@pytest.mark.parametrize("pair", ddtp.SHIPPED_PAIRS)
def test_shipped_corpus_checksums(pair):
    """Every run: the shipped .xz files and their decompressed text match the manifest."""
    corpus = Corpus.load(ddtp.SHIPPED_DIR / pair)  # verifies the sha256 of every .xz file
    assert corpus.language_pair == pair and corpus.manifest["source"] == "ddtp"
    assert corpus.counts == EXPECTED_COUNTS[pair]
    for name, entry in corpus.manifest["files"].items():
        assert name.endswith(".xz")
        text = lzma.decompress((corpus.directory / name).read_bytes())
        assert hashlib.sha256(text).hexdigest() == entry["text_sha256"], name
        assert text.count(b"\n") == entry["lines"]
    cleaning = corpus.manifest["cleaning"]["all"]
    assert cleaning["kept"] == sum(corpus.counts.values())
    assert cleaning["input"] == cleaning["kept"] + sum(
        cleaning[r] for r in ("empty", "too_long", "length_ratio", "duplicate"))


def test_shipped_size_and_readme():
    total = sum(p.stat().st_size for p in ddtp.SHIPPED_DIR.rglob("*") if p.is_file())
    assert total < 20 * 2**20
    corpora = {pair: Corpus.load(ddtp.SHIPPED_DIR / pair) for pair in ddtp.SHIPPED_PAIRS}
    # The README's checksums and counts are those of the shipped files.
    assert (ddtp.SHIPPED_DIR / "README.md").read_text(encoding="utf-8") == ddtp.render_readme(
        corpora)


@pytest.mark.parametrize("pair", ddtp.SHIPPED_PAIRS)
def test_no_english_sentence_in_two_splits(pair):
    corpus = ddtp.shipped_corpus(pair)
    english = {split: set(corpus.lines(split, "en")) for split in SPLITS}
    assert not english["train"] & english["validation"]
    assert not english["train"] & english["test"]
    assert not english["validation"] & english["test"]
    # The split is a function of the English sentence alone.
    for split in ("validation", "test"):
        assert {ddtp.split_of(s, 0.04, 0.04) for s in english[split]} == {split}


def test_rebuild_from_raw_debian_files_is_bit_identical(shared_data_dir, tmp_path):
    """Runs the builder on ../shared/data/debian-ddtp and compares with the shipped text."""
    raw = shared_data_dir / "debian-ddtp"
    translations = {lang: ddtp.find_translation_file(raw, lang) for lang in ("en", "de", "fr")}
    built = ddtp.build(translations, tmp_path, ddtp.SHIPPED_PAIRS, compress=False)
    for pair, corpus in built.items():
        shipped = ddtp.shipped_corpus(pair)
        assert ddtp.compare_corpora(corpus, shipped) == []
        for split in SPLITS:
            for lang in pair.split("-"):
                assert sha256_file(corpus.path(split, lang)) == shipped.file_sha256(split, lang)
        assert corpus.manifest["provenance"]["input_files"] == \
            shipped.manifest["provenance"]["input_files"]


# --- the builder on small, hand-written Translation files ---------------------------------------

def _record(package, md5, lang, summary, paragraphs):
    body = "\n .\n".join("\n".join(f" {line}" for line in p) for p in paragraphs)
    return f"Package: {package}\nDescription-md5: {md5}\nDescription-{lang}: {summary}\n{body}\n"


def _write_translations(directory, n=200):
    """English and German files with n descriptions of two paragraphs; a few irregular ones."""
    en, de = [], []
    for i in range(n):
        md5 = f"{i:032x}"
        en.append(_record(f"pkg{i}", md5, "en", f"tool number {i}",
                          [[f"This tool {i} does", "useful things."], [f"Second part {i}."]]))
        de.append(_record(f"pkg{i}", md5, "de", f"Werkzeug Nummer {i}",
                          [[f"Dieses Werkzeug {i} tut", "nützliche Dinge."],
                           [f"Zweiter Teil {i}."]]))
    # Paragraph counts differ: the whole description is skipped.
    en.append(_record("odd", "f" * 32, "en", "odd summary", [["one"], ["two"]]))
    de.append(_record("odd", "f" * 32, "de", "seltsam", [["eins zwei"]]))
    # Only in English: not paired.
    en.append(_record("lonely", "e" * 32, "en", "untranslated", [["text"]]))
    # A second package with the same description: the first record wins, no duplicate pairs.
    de.append(_record("pkg0-dup", f"{0:032x}", "de", "Werkzeug Nummer 0", [["ignored"]]))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "Translation-en.xz").write_bytes(lzma.compress("\n".join(en).encode()))
    (directory / "Translation-de.bz2").write_bytes(bz2.compress("\n".join(de).encode()))
    return directory


def test_parse_and_align_small_files(tmp_path):
    raw = _write_translations(tmp_path / "raw")
    english = ddtp.parse_translation_file(ddtp.find_translation_file(raw, "en"))
    german = ddtp.parse_translation_file(ddtp.find_translation_file(raw, "de"))
    assert english[f"{5:032x}"] == ddtp.Description(
        "tool number 5", ("This tool 5 does useful things.", "Second part 5."))
    assert german[f"{0:032x}"].paragraphs[0] == "Dieses Werkzeug 0 tut nützliche Dinge."
    pairs, stats = ddtp.align_descriptions(english, german)
    assert stats == {"descriptions_in_both": 201, "paragraph_count_mismatch": 1}
    assert len(pairs) == 3 * 200
    assert pairs[:3] == [("tool number 0", "Werkzeug Nummer 0"),
                         ("This tool 0 does useful things.",
                          "Dieses Werkzeug 0 tut nützliche Dinge."),
                         ("Second part 0.", "Zweiter Teil 0.")]


def test_cli_builds_and_checks(tmp_path):
    raw = _write_translations(tmp_path / "raw")
    out = tmp_path / "out"
    assert ddtp.main(["--translations-dir", str(raw), "--pairs", "en-de",
                      "--output-dir", str(out)]) == 0
    corpus = Corpus.load(out / "en-de")
    assert sum(corpus.counts.values()) == 600
    assert all(corpus.counts[split] > 0 for split in SPLITS)
    assert ddtp.main(["--translations-dir", str(raw), "--pairs", "en-de", "--output-dir",
                      str(out), "--check"]) == 0
    # A changed input is detected by --check.
    german = ddtp.find_translation_file(raw, "de")
    german.write_bytes(bz2.compress(bz2.decompress(german.read_bytes()).replace(
        b"Zweiter Teil 7.", b"Zweiter Teil sieben.")))
    assert ddtp.main(["--translations-dir", str(raw), "--pairs", "en-de", "--output-dir",
                      str(out), "--check"]) == 1


def test_invalid_utf8_in_translation_file_names_file_and_line(tmp_path):
    path = tmp_path / "Translation-de"
    path.write_bytes(b"Package: a\nDescription-md5: 0\nDescription-de: gut\n"
                     b" Zeile\n\nPackage: b\nDescription-md5: 1\nDescription-de: schlecht \xe4\n")
    with pytest.raises(DataError, match=rf"{path}:8: not valid UTF-8"):
        ddtp.parse_translation_file(path)


def test_not_a_translation_file(tmp_path):
    path = tmp_path / "Translation-de"
    path.write_text("just some text\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{path}:1: expected 'Field: value'"):
        ddtp.parse_translation_file(path)
    with pytest.raises(DataError, match="no Translation-fr"):
        ddtp.find_translation_file(tmp_path, "fr")


def test_mirror_offline_fails_fast(tmp_path, monkeypatch):
    """The mirror code path up to the network boundary: no network -> clear error at once, that
    is after one connection attempt with the short probe timeout (counted, not timed)."""
    attempts = []

    def offline(address, timeout=None, *args, **kwargs):
        attempts.append((address, timeout))
        raise OSError(101, "Network is unreachable")

    monkeypatch.setattr(socket, "create_connection", offline)
    with pytest.raises(ConnectionError, match="deb.debian.org.*unreachable.*Network is unreach"):
        ddtp.fetch_translation_files("http://deb.debian.org/debian", "bookworm", ["en", "de"],
                                     tmp_path, timeout=3)
    assert attempts == [(("deb.debian.org", 80), 3)]
    assert not any(tmp_path.rglob("Translation-*"))
