"""The English-only pool: nothing of the evaluation in it (shipped and as built), a folder of one's own text."""

import lzma

import pytest

from pipelines.corpus import SPLITS, Corpus, write_corpus
from pipelines.tasks.translation import ddtp_monolingual as mono
from pipelines.tasks.translation.ddtp_packages import SHARED_MARK, UNSEEN_SPLIT
from pipelines.tasks.translation.pool import PoolConfig, load_pool, pool_files
from pipelines.textfiles import DataError

EVALUATION = ("validation", "test", UNSEEN_SPLIT)


def test_the_shipped_pool_holds_no_evaluation_package_sentence_or_parallel_source():
    corpus = Corpus.load(mono.PARALLEL_DIR)
    pool = mono.read_pool()
    stems = list(mono.read_lines(mono.POOL_DIR / mono.PACKAGES_FILE))
    manifest = mono.json.loads((mono.POOL_DIR / mono.MANIFEST_FILE).read_text("utf-8"))
    assert len(pool) == len(stems) == manifest["count"] > 50_000 and len(set(pool)) == len(pool)
    sources, held_stems, held_sentences = mono.evaluation_exclusions(corpus)
    assert len(held_stems) > 1000 and len(held_sentences) > 3000  # the rule has something to exclude
    assert not set(pool) & sources
    assert not held_stems & {stem for line in stems for stem in line.split()}
    assert not any(mono.holds_a_sentence(pool, held_sentences))
    # The evaluation's own paragraphs, word for word, are the first thing the rule keeps out.
    for split in EVALUATION:
        assert not set(pool) & set(corpus.lines(split, "en")), split
    assert manifest["exclusions"]["evaluation_package"] > 0 and manifest["exclusions"]["evaluation_sentence"] > 0
    assert (mono.POOL_DIR / mono.POOL_FILE).stat().st_size < 4_000_000  # the repository stays lean
    readme = (mono.POOL_DIR / mono.README_FILE).read_text("utf-8")
    assert manifest["files"][mono.POOL_FILE]["sha256"] in readme and "test_unseen" in readme


def _record(package, md5, summary, paragraphs):
    body = "\n .\n".join(f" {p}" for p in paragraphs)
    return f"Package: {package}\nDescription-md5: {md5}\nDescription-en: {summary}\n{body}\n"


@pytest.fixture()
def small(tmp_path):
    """A parallel corpus whose test split holds package ``tested`` and a boilerplate sentence, and an English
    file with descriptions of every kind the rule must keep out or let in."""
    splits = {split: [(f"A {split} sentence of paired text.", f"Ein Satz {split}.")] for split in SPLITS}
    splits["test"].append(("The tested tool checks things.", "Das Werkzeug prüft Dinge."))
    splits["test"].append(("This package contains the documentation.", "Dieses Paket enthält die Dokumentation."))
    splits[UNSEEN_SPLIT] = [("Unseen words of a held package.", "Ungesehene Wörter.")]
    side = {"train.packages": ["pairedpkg"], "validation.packages": ["valpkg"],
            "test.packages": ["test", "tested", SHARED_MARK], f"{UNSEEN_SPLIT}.packages": ["held"]}
    corpus = write_corpus(tmp_path / "en-de", "en", "de", splits, source="t", side_files=side, compress=False)
    records = [
        _record("libtested-dev", "1", "Development files of tested", ["Headers for the tested library."]),
        _record("held-data", "2", "Data of held", ["Icons and sounds."]),
        _record("newtool", "3", "A new tool", ["It converts images to text. This package contains the documentation.",
                                              "It is small and fast."]),
        _record("other", "4", "A train sentence of paired text.", ["Another paragraph of its own."]),
        _record("twin", "5", "A new tool", ["It is small and fast."]),
    ]
    translations = tmp_path / "dists"
    translations.mkdir()
    (translations / "Translation-en.xz").write_bytes(lzma.compress("\n".join(records).encode()))
    return corpus, translations


def test_the_builder_excludes_by_package_by_sentence_and_by_pair(small, tmp_path):
    corpus, translations = small
    manifest = mono.build_pool(translations, tmp_path / "pool", corpus.directory)
    pool = list(mono.read_lines(tmp_path / "pool" / mono.POOL_FILE))
    assert pool == ["A new tool", "It is small and fast.", "Another paragraph of its own."]
    assert list(mono.read_lines(tmp_path / "pool" / mono.PACKAGES_FILE)) == ["newtool", "newtool", "other"]
    counts = manifest["exclusions"]
    # libtested-dev (stem tested) and held-data (stem held): packages of test and test_unseen.
    assert counts["evaluation_package"] == 4
    assert counts["evaluation_sentence"] == 1  # the paragraph holding the test split's boilerplate sentence
    assert counts["source_of_a_pair"] == 1 and counts["duplicate"] == 2 and counts["kept"] == 3
    assert mono.read_pool(tmp_path / "pool") == pool
    (tmp_path / "pool" / mono.POOL_FILE).write_bytes(lzma.compress(b"changed\n"))
    with pytest.raises(DataError, match="checksum differs"):
        mono.read_pool(tmp_path / "pool")


def test_a_folder_pool_goes_through_the_same_filters(small, tmp_path):
    corpus, _ = small
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "a.txt").write_text("My  first line.\n\nThe tested tool checks things.\nMy first line.\n", "utf-8")
    (folder / "b.txt.gz").write_bytes(__import__("gzip").compress(b"Second file. This package contains the "
                                                                  b"documentation.\nA last line.\n"))
    assert load_pool(PoolConfig(source="folder", folder=str(folder)), corpus) == ["My first line.", "A last line."]
    assert load_pool(PoolConfig(source="folder", folder=str(folder), max_lines=1)) == ["My first line."]


def test_a_pool_file_that_is_not_text_is_named_in_one_line_before_any_work(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "a.txt").write_text("Fine.\n", "utf-8")
    (folder / "model.bin").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    with pytest.raises(DataError, match=r"^.*model\.bin: not a text file \(a NUL byte at byte 8\)[^\n]*$"):
        pool_files(PoolConfig(source="folder", folder=str(folder)))
    (folder / "model.bin").write_bytes("Grüße\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"model\.bin:1: not valid UTF-8"):
        pool_files(PoolConfig(source="folder", folder=str(folder)))
    with pytest.raises(DataError, match="not a directory"):
        pool_files(PoolConfig(source="folder", folder=str(tmp_path / "missing")))
    with pytest.raises(ValueError, match="PoolConfig.folder=None: source 'folder' needs folder"):
        PoolConfig(source="folder")
    with pytest.raises(ValueError, match="PoolConfig.source='web'"):
        PoolConfig(source="web")
