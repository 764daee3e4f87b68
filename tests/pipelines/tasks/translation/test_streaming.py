"""The data stages streamed (issue 60): the same bytes as the list-holding stages wrote, on every
core, and an interrupted stage that a rerun finishes; a corpus of other settings refused before start."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pipelines import token_cache
from pipelines.config import ConfigError
from pipelines.corpus import MANIFEST, Corpus, compress_xz, lines_to_bytes, write_corpus
from pipelines.quiet_tensorflow import is_start_up_line
from pipelines.tasks.translation.cleaning import CleaningConfig, SeenPairs, clean_pairs
from pipelines.tasks.translation.sources import SourceConfig, prepare_corpus
from pipelines.tasks.translation.sources import folder as folder_module
from pipelines.textfiles import DataError

#: Computed with the data stages as they were before they streamed (commit 8f4264f): the prepared
#: corpora's files, their manifests, the tokenizer trained on the bundled En-De corpus and its caches.
#: That code's records put a pair's ``source`` and ``target`` in the order of a per-process hash seed,
#: so its caches were one of two byte strings of the same ids; these are the ones with ``source``
#: first, which the records now always have (``pipelines.token_cache``, deterministic serialization).
#: The bundled corpora's manifests since record the setting ``data.train_targets`` (references here).
GOLDEN = {
    "ddtp en-de": {
        "test.de": "c3f1d89271d66ee941c5d64649c2238ab6f670aa4918960cdfe507a6e4e8c09d",
        "test.en": "daec49e742727d07bce954aeb32c402fd98b1af4eb36ee11c86ba75d48860e21",
        "test_unseen.de": "3515e844f1055da3e2a9c9eda878566e64690591204c422de7044163e7a6ea7c",
        "test_unseen.en": "76f6a99785bb8f52e1462a16e7b699e8e45426fa4fe7a75c493de15a8f969efc",
        "train.de": "5c1b906ed0384ece1ed19e0e19309b65904c70b1e95d42149cd5258b494c2c61",
        "train.en": "8c6c21223ff2cba3b936d4cd058c6dba117c5ef2423296b30d52edb80c8c5d6a",
        "validation.de": "3c0dd0529854e4c9604a7ce7ea9a147a23cb465b076eea61879c75429b15dfb6",
        "validation.en": "078c10fc5e7a4c402fe76686c4aa83dc36aae8468eb171db8c4581f6eaafd8a9",
        "manifest": "27f9a06d4c2573d5493bb74a73dbbaad8c87c55fee2c1cb78ba216282d3c0e2e",
    },
    "ddtp de-en": {"manifest": "bb6e9b3d86c6ab025fd0edeaf5c9c9b8643eac7c5b9802db3516f30dfe190db7"},
    "folder": {
        "test.de": "1ca8079b025161b85482dd1ad7531f6d2955bd93324668877e6d98f23e3ca0e2",
        "test.en": "a50990bc6e78bd4527d85ac7f7d25429fd00e73c68124debd95572fad51f274f",
        "train.de": "3fe53e031d4b7fc161d5c2f95d80683818ac9b260ff2962c5edff9250902596f",
        "train.en": "f64d0d7f9001ba864b0f2373cc851e84997d6c77580f89d9473d001615413fa3",
        "validation.de": "5a36ef31dfed8815be478c1a343ba727507d76e741e12fa3aad66dee7c243696",
        "validation.en": "27774705b0a33907a46ee506b4f4f6beb3376de1bc25d0ddd3252820659c243e",
        "manifest": "2d22be07837d6fb663ad558a9486f730b7eb3b020522199928073034642ab574",
    },
    "tokenizer": "0d25d8ec807523ccdbc9d8a674a0ab7e8ff60cf7060c6e94a6e3259ea5d1b167",
    "cache train only": {"name": "en-de.train.5d0091da67083535.tfrecord",
                         "tfrecord": "2f54324e861cd1208c0428138c0b2d79bf08c6f4f38ce9283b3c3a1152491db9",
                         "lengths": "43f3a043f86943f529f2994eeee114c558c27d266d8c310b42785cb6079462fa"},
    "cache train none": {"name": "en-de.train.a9cc238fc91e0447.tfrecord",
                         "tfrecord": "895364e9b95e64358aa5f9706877dc5b4d198de538e55683530147d6165971ec",
                         "lengths": "230247e1b2e26c1531a0753b18499e99b584c13734bafcbdb351770f565c76b9"},
    "cache validation none": {"name": "en-de.validation.0ff47ffe83cf0126.tfrecord",
                              "tfrecord": "60fd1338d991cd0f5a2831c95462b5b81d852cd16f06f323e98c2a1b65b522b6",
                              "lengths": "0a25163bb5a3abdc58ba83899fc49868be03fb287d0a11f754147866b5864e59"},
    "cache test_unseen none": {"name": "en-de.test_unseen.320b973dc01d139c.tfrecord",
                               "tfrecord": "b385b3e1220566514247088ab4c2d8810f848ca50460bfcc938d93cc1f6a2618",
                               "lengths": "ef3eee68934cd1daa597a360504eda528110ceffc1103bd3b0e40f782f85bc81"},
}


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def corpus_hashes(directory: Path, with_provenance: bool = True) -> dict[str, str]:
    """Each file's sha256 from the manifest (verified on load), and a hash of the manifest (without
    its provenance where that names a temporary path)."""
    corpus = Corpus.load(directory)
    hashes = {name: entry["sha256"] for name, entry in sorted(corpus.manifest["files"].items())}
    manifest = dict(corpus.manifest)
    if not with_provenance:
        manifest.pop("provenance")
    hashes["manifest"] = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()
    return hashes


def write_folder(folder: Path, corpus: Corpus) -> Path:
    """Bundled pairs, some twice, an empty one, one too unequal in length and unnormalised text:
    every cleaning reason, and held-out splits carved out by the source's hash."""
    pairs = (list(corpus.pairs("train"))[:2500] + list(corpus.pairs("test_unseen"))[:800]
             + list(corpus.pairs("test"))[:300])
    pairs += pairs[:50]
    pairs += [("", "leer"), ("one two", "eins zwei drei vier fünf sechs sieben acht neun zehn"),
              ("  spaced\u00a0 text ", "\ufb01 ligature")]
    folder.mkdir(parents=True)
    (folder / "news.train.en").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (folder / "news.train.de").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return folder


@pytest.mark.slow
def test_streamed_stages_write_the_bytes_the_list_holding_stages_wrote(tmp_path, monkeypatch, capfd):
    """Prepared corpora (bundled both ways, a folder with held-out splits), the vocabulary and the
    token caches (paragraphs and sentence pairs), the caches written by one process and by two."""
    from pipelines.input_pipeline import InputConfig, build_cache, lengths_path
    from pipelines.tokenization import TokenizerConfig, load_tokenizers, train_tokenizer

    en_de = prepare_corpus(SourceConfig(source="ddtp", output_dir=str(tmp_path / "en-de")))
    assert corpus_hashes(en_de) == GOLDEN["ddtp en-de"]
    de_en = prepare_corpus(SourceConfig(source="ddtp", language_pair="de-en", output_dir=str(tmp_path / "de-en")))
    assert corpus_hashes(de_en)["manifest"] == GOLDEN["ddtp de-en"]["manifest"]
    corpus = Corpus.load(en_de)
    folder = write_folder(tmp_path / "folder" / "files", corpus)
    prepared = prepare_corpus(SourceConfig(source="folder", folder=str(folder), holdout_fraction=0.1,
                                           output_dir=str(tmp_path / "folder" / "out")))
    assert corpus_hashes(prepared, with_provenance=False) == GOLDEN["folder"]

    models = train_tokenizer(corpus, TokenizerConfig(vocab_size=2000, verbatim=True), tmp_path / "tokenizer")
    assert sha256(models.source) == GOLDEN["tokenizer"]
    record = json.loads(Path(models.source).with_suffix(".json").read_text(encoding="utf-8"))
    assert record["sampling"] == {"lines": 2 * corpus.counts["train"], "sampled": 2 * corpus.counts["train"],
                                  "seed": 0, "method": "all lines"}
    tokenizers = load_tokenizers(models)
    splits = (("train", "only"), ("train", "none"), ("validation", "none"), ("test_unseen", "none"))
    for processes, minimum in ((1, 10**9), (2, 1000)):
        capfd.readouterr()  # what this process printed so far
        monkeypatch.setattr(token_cache, "MIN_PAIRS_PER_WORKER", minimum)
        monkeypatch.setattr(token_cache, "usable_cores", lambda: 2)
        config = InputConfig(cache_dir=str(tmp_path / f"cache-{processes}"))
        assert token_cache.worker_count(corpus.counts["train"]) == processes
        for split, mode in splits:
            path = build_cache(corpus, split, tokenizers, config, mode)
            assert {"name": path.name, "tfrecord": sha256(path), "lengths": sha256(lengths_path(path))} == \
                GOLDEN[f"cache {split} {mode}"], (processes, split, mode)
    # The worker processes import TensorFlow as the entry points do: none of its start-up lines in the run's log.
    assert not [line for line in capfd.readouterr().err.splitlines() if is_start_up_line(line)]


def test_write_corpus_streams_any_iterable_to_the_bytes_of_lists(tmp_path):
    pairs = [(f"source {i} ü", f"Ziel {i}") for i in range(20000)]
    splits = {"train": pairs, "validation": pairs[:3], "test": pairs[3:5]}
    for compress in (False, True):
        lists = write_corpus(tmp_path / f"lists-{compress}", "en", "de", splits, source="t", compress=compress,
                             side_files={"train.packages": [str(i) for i in range(20000)]})
        streams = write_corpus(tmp_path / f"streams-{compress}", "en", "de", {k: iter(v) for k, v in splits.items()},
                               source="t", compress=compress,
                               side_files={"train.packages": (str(i) for i in range(20000))})
        assert lists.manifest == streams.manifest
        assert lists.counts == {"train": 20000, "validation": 3, "test": 2}
        text = lines_to_bytes(s for s, _ in pairs)
        written = (lists.directory / ("train.en.xz" if compress else "train.en")).read_bytes()
        assert written == (compress_xz(text) if compress else text)


def test_a_line_break_names_the_file_and_line(tmp_path):
    with pytest.raises(DataError, match=r"train.de: line 2 contains a line break"):
        write_corpus(tmp_path, "en", "de", {"train": [("a", "b"), ("c", "d\ne")], "validation": [], "test": []},
                     source="t")
    assert not list(tmp_path.glob(".*.tmp")) and not (tmp_path / MANIFEST).exists()


def test_seen_pairs_says_what_a_set_of_the_pairs_says(monkeypatch):
    monkeypatch.setattr(SeenPairs, "PENDING", 8)  # many merges
    monkeypatch.setattr(SeenPairs, "BLOCK", 16)  # into many blocks
    seen, reference = SeenPairs(), set()
    for i in range(3000):
        pair = (f"s{i % 997}", f"t{i % 991}")
        assert seen.add(*pair) == (pair not in reference)
        reference.add(pair)
    assert len(seen) == len(reference) and len(seen.blocks) > 10
    assert all(a[-1] < b[0] for a, b in zip(seen.blocks, seen.blocks[1:]))
    # The source's length is part of the digest: "ab"+"c" and "a"+"bc" are two pairs.
    assert SeenPairs.digest("ab", "c") != SeenPairs.digest("a", "bc")


def test_cleaning_streamed_counts_as_the_list_did():
    pairs = [("a b", "c d"), ("a b", "c d"), ("", "x"), ("one", "one two three four"), ("x " * 300, "y")]
    kept, counts = clean_pairs(pairs, CleaningConfig())
    assert kept == [("a b", "c d")]
    assert counts == {"input": 5, "empty": 1, "too_long": 1, "length_ratio": 1, "duplicate": 1, "kept": 1}


def test_an_interrupted_prepare_leaves_nothing_trusted_and_a_rerun_finishes_and_verifies(tmp_path, monkeypatch):
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "news.train.en").write_text("".join(f"Sentence number {i}.\n" for i in range(3000)))
    (folder / "news.train.de").write_text("".join(f"Satz Nummer {i}.\n" for i in range(3000)))
    config = SourceConfig(source="folder", folder=str(folder), output_dir=str(tmp_path / "out"))
    real = folder_module.read_parallel

    def killed_halfway(*paths):
        for i, pair in enumerate(real(*paths)):
            if i == 1500:
                raise KeyboardInterrupt("killed")
            yield pair

    monkeypatch.setattr(folder_module, "read_parallel", killed_halfway)
    with pytest.raises(KeyboardInterrupt):
        prepare_corpus(config)
    out = tmp_path / "out"
    assert not (out / MANIFEST).exists() and not list(out.glob(".*.tmp")) and not list(out.iterdir())
    monkeypatch.setattr(folder_module, "read_parallel", real)
    corpus = Corpus.load(prepare_corpus(config))
    assert sum(corpus.counts.values()) == 3000


def test_a_corpus_of_other_settings_is_refused_before_start_and_by_the_stage(tmp_path):
    """Issue 61: the run_dir's corpus that earlier runs depend on is not rewritten for other settings."""
    from flows.preflight import check_before_start
    from flows.task_flows import TRANSLATION

    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "news.train.en").write_text("".join(f"Sentence number {i} .\n" for i in range(400)))
    (folder / "news.train.de").write_text("".join(f"Satz Nummer {i} .\n" for i in range(400)))
    settings = {"run_dir": str(tmp_path / "run"),
                "data": {"source": "folder", "folder": str(folder), "train_targets": "references"}}
    config = TRANSLATION.load_config("configs/translation/demo.yaml", settings)
    prepare_corpus(config.data)
    manifest = Path(config.data.output_dir) / MANIFEST
    before = manifest.read_bytes()
    check_before_start(config, TRANSLATION.check_data)  # the same settings pass
    other = TRANSLATION.load_config("configs/translation/demo.yaml",
                                    {**settings, "data": {**settings["data"], "cleaning": {"max_words": 3}}})
    expected = rf"{manifest}: the corpus was prepared with other settings \(data.cleaning.max_words 200, not 3\)"
    with pytest.raises(ConfigError, match=expected):
        check_before_start(other, TRANSLATION.check_data)
    with pytest.raises(ConfigError, match=expected):
        prepare_corpus(other.data)
    assert manifest.read_bytes() == before
