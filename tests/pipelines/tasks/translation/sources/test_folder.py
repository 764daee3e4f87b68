"""The ``folder`` source: layouts, cleaning counts, derived splits, input errors naming file and line."""

import pytest

from pipelines.corpus import MANIFEST, SPLITS, Corpus
from pipelines.tasks.translation.sources import SourceConfig, prepare_corpus
from pipelines.tasks.translation.sources.folder import find_folder_files
from pipelines.textfiles import DataError


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


def test_a_prepared_corpus_folder_reads_back_with_its_test_unseen_split(tmp_path):
    # A corpus another stage wrote (the student's real + synthetic mix, for one) trains through the folder
    # source and is scored on its second test split too; test_unseen is never carved out of train.
    folder = tmp_path / "in"
    folder.mkdir()
    for split, n in (("train", 6), ("validation", 2), ("test", 2), ("test_unseen", 3)):
        _write(folder / f"{split}.en", [f"{split} sentence {i}" for i in range(n)])
        _write(folder / f"{split}.de", [f"{split} Satz {i}" for i in range(n)])
    assert set(find_folder_files(folder, "en", "de")) == {"train", "validation", "test", "test_unseen"}
    corpus = Corpus.load(prepare_corpus(SourceConfig(source="folder", folder=str(folder),
                                                     output_dir=str(tmp_path / "out"))))
    assert list(corpus.pairs("test_unseen")) == [(f"test_unseen sentence {i}", f"test_unseen Satz {i}")
                                                 for i in range(3)]
    assert corpus.counts["train"] == 6

    (folder / "test_unseen.de").unlink()
    with pytest.raises(DataError, match="test_unseen.en has no de counterpart"):
        find_folder_files(folder, "en", "de")


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
