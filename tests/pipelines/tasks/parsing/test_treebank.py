"""Penn Treebank reader (pipelines/tasks/parsing/treebank.py, tree.py) on the toy treebank and the real NLTK sample."""

import re
import zipfile

import pytest

from pipelines.tasks.parsing.linearize import PTB_LABELS, delinearize, linearize, repair
from pipelines.tasks.parsing.tree import Leaf, Tree, TreebankError, iter_trees, parse_tree, strip_function_tags
from pipelines.tasks.parsing.treebank import load_splits, read_mrg, read_mrg_text

PIERRE_VINKEN = (
    "(TOP (S (NP (NP (NNP Pierre) (NNP Vinken)) (, ,) (ADJP (NP (CD 61) (NNS years)) (JJ old)) (, ,)) "
    "(VP (MD will) (VP (VB join) (NP (DT the) (NN board)) (PP (IN as) (NP (DT a) (JJ nonexecutive) "
    "(NN director))) (NP (NNP Nov.) (CD 29)))) (. .)))"
)


def _member(sample_zip, number: int) -> str:
    with zipfile.ZipFile(sample_zip) as archive:
        return archive.read(f"treebank/combined/wsj_{number:04d}.mrg").decode()


def test_the_nltk_sample(sample_zip, sample_splits):
    """The real sample's own figures, and every one of its trees normalised and linearised back."""
    trees = sample_splits["train"] + sample_splits["dev"] + sample_splits["test"]
    assert len(trees) == 3914
    assert {name: len(split) for name, split in sample_splits.items()} == {"train": 3396, "dev": 273, "test": 245}
    # Counted independently as top-level bracket groups; wsj_0003 and wsj_0100 are long files.
    expected = {1: 2, 2: 1, 3: 30, 10: 20, 100: 42, 199: 3}
    for number, count in expected.items():
        read, errors = read_mrg_text(_member(sample_zip, number), f"wsj_{number:04d}.mrg")
        assert (len(read), errors) == (count, []), number

    first = sample_splits["train"][0]
    assert first.to_string() == PIERRE_VINKEN and parse_tree(PIERRE_VINKEN) == first
    assert first.words()[:4] == ["Pierre", "Vinken", ",", "61"] and first.tags()[-3:] == ["NNP", "CD", "."]
    raw = ("( (S (NP-SBJ (-NONE- *)) (VP (VB Pick) (NP (NP (DT a) (NN country)) (, ,) (NP (DT any) (NN country)))) "
           "(. .)))")
    assert next(iter_trees(_member(sample_zip, 34), normalize=False)).to_string() == raw
    pick = next(tree for tree in trees if tree.words()[:2] == ["Pick", "a"])
    assert pick.to_string() == ("(TOP (S (VP (VB Pick) (NP (NP (DT a) (NN country)) (, ,) (NP (DT any) (NN country)))) "
                                "(. .)))")
    lrb = next(tree for tree in trees if tree.words()[:2] == ["-LRB-", "Fewer"])
    assert lrb.tags()[0] == "-LRB-" and lrb.tags()[-1] == "-RRB-"
    assert lrb.to_string().startswith("(TOP (S (-LRB- -LRB-) (NP (JJR Fewer))")
    assert sum(tree.tags().count("-LRB-") for tree in trees) > 50
    _assert_normalised(trees)
    for tree in trees:
        target = linearize(tree)
        assert delinearize(target, tree.words()) == tree, tree.to_string()
        assert repair(target, tree.words()) == tree, tree.to_string()


def _assert_normalised(trees):
    for tree in trees:
        assert "-NONE-" not in tree.tags()
        stack = [tree]
        while stack:
            node = stack.pop()
            assert node.children, tree.to_string()
            assert node.label in PTB_LABELS or node is tree
            stack.extend(child for child in node.children if isinstance(child, Tree))
        assert tree.label == "TOP"


def _toy_files(toy_treebank):
    return sorted((toy_treebank / "combined").glob("wsj_*.mrg"))


def test_tree_counts_per_file(toy_treebank, toy_trees):
    assert len(toy_trees) == 720
    files = _toy_files(toy_treebank)
    assert [file.name for file in files] == [f"wsj_{number:04d}.mrg" for number in range(1, 200)]
    for file in files:
        text = file.read_text()
        # Counted independently: a tree starts on a line opening with "( (", its inner lines are indented.
        read, errors = read_mrg_text(text, file.name)
        assert (len(read), errors) == (sum(line.startswith("( (") for line in text.splitlines()), []), file.name


def test_empty_elements_and_function_tags_removed(toy_treebank, toy_trees):
    raw = [tree for file in _toy_files(toy_treebank) for tree in iter_trees(file.read_text(), normalize=False)]
    assert len(raw) == len(toy_trees)
    written = "\n".join(tree.to_string() for tree in raw)
    for marked in ("(-NONE- *T*-1)", "(-NONE- 0)", "(-NONE- *-1)", "(-NONE- *U*)", "(NP-SBJ ", "(S-TPC-1 ",
                   "(PP-LOC ", "(NP-TMP "):
        assert marked in written, marked
    for before, after in zip(raw, toy_trees):
        assert parse_tree(before.to_string()) == after
        if "*T*-1" in before.to_string():
            # (VP (VBD said) (SBAR (-NONE- 0) (S (-NONE- *T*-1)))): the SBAR goes with the S it empties.
            assert "(VP (VBD said))" in after.to_string(), after.to_string()
    _assert_normalised(toy_trees)
    assert parse_tree(toy_trees[0].to_string()) == toy_trees[0]
    lrb = next(tree for tree in toy_trees if "-LRB-" in tree.words())
    assert "(PRN (-LRB- -LRB-) (ADVP (RB " in lrb.to_string() and lrb.tags().count("-RRB-") == 1


def test_recursive_emptying_and_labels():
    tree = parse_tree("( (S (NP-SBJ-1 (NNP John)) (VP (VBD said) (SBAR (-NONE- 0) (S (NP-SBJ (-NONE- *T*-1)))))\n"
                      "   (PP-LOC=2 (IN in) (NP (NNP Paris))) (. .)) )")
    assert tree.to_string() == "(TOP (S (NP (NNP John)) (VP (VBD said)) (PP (IN in) (NP (NNP Paris))) (. .)))"
    assert strip_function_tags("NP-SBJ-1") == "NP"
    assert strip_function_tags("PP-LOC=2") == "PP"
    assert strip_function_tags("-LRB-") == "-LRB-"
    assert strip_function_tags("ADVP|PRT") == "ADVP|PRT"
    # A root without the PTB's empty bracket is wrapped, not relabelled.
    assert parse_tree("(S-HLN (NN x))") == Tree("TOP", (Tree("S", (Leaf("NN", "x"),)),))
    raw = parse_tree("( (S (NP-SBJ (-NONE- *)) (VP (VB go))) )", normalize=False)
    assert raw.label == "" and raw.children[0].children[0].label == "NP-SBJ"
    assert parse_tree(raw.to_string(), normalize=False) == raw


def test_splits_by_file(toy_splits, toy_treebank):
    assert {name: len(trees) for name, trees in toy_splits.items()} == {"train": 600, "dev": 60, "test": 60}
    last_of_train = read_mrg(toy_treebank / "combined" / "wsj_0159.mrg")[0]
    first_of_dev = read_mrg(toy_treebank / "combined" / "wsj_0160.mrg")[0]
    last_of_dev = read_mrg(toy_treebank / "combined" / "wsj_0179.mrg")[0]
    first_of_test = read_mrg(toy_treebank / "combined" / "wsj_0180.mrg")[0]
    assert toy_splits["train"][-len(last_of_train):] == last_of_train
    assert toy_splits["dev"][: len(first_of_dev)] == first_of_dev
    assert toy_splits["dev"][-len(last_of_dev):] == last_of_dev
    assert toy_splits["test"][: len(first_of_test)] == first_of_test


def test_unpacked_sample_folder(tmp_path, toy_treebank, toy_splits):
    # The same files as the sample's zip holds them (treebank/combined/...) read alike in all three forms.
    archive_path = tmp_path / "treebank.zip"
    with zipfile.ZipFile(archive_path, "w") as archive:
        for file in _toy_files(toy_treebank):
            archive.write(file, f"treebank/combined/{file.name}")
    assert load_splits(archive_path) == toy_splits
    with zipfile.ZipFile(archive_path) as archive:
        archive.extractall(tmp_path / "corpora")
    assert load_splits(tmp_path / "corpora" / "treebank") == toy_splits
    assert load_splits(tmp_path / "corpora") == toy_splits
    assert load_splits(tmp_path / "corpora" / "treebank" / "combined") == toy_splits


def test_wsj_sections(tmp_path):
    for section in ("01", "02", "21", "22", "23", "24"):
        (tmp_path / section).mkdir()
        text = f"( (S (NN s{section}) ) )\n( (NP (NN t{section})) )\n"
        (tmp_path / section / f"wsj_{section}00.mrg").write_text(text)
    splits = load_splits(tmp_path)
    assert [tree.words() for tree in splits["train"]] == [["s02"], ["t02"], ["s21"], ["t21"]]
    assert [tree.words()[0] for tree in splits["dev"] + splits["test"]] == ["s22", "t22", "s23", "t23"]


def test_unrecognised_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="nltk.downloader treebank"):
        load_splits(tmp_path / "missing.zip")
    with pytest.raises(ValueError, match=f"{tmp_path}.*nltk.downloader treebank.*zip file or at the unpacked"):
        load_splits(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="not a zip archive"):
        load_splits(tmp_path / "notes.txt")


GOOD_1 = "( (S \n    (NP-SBJ (NNP Ann) )\n    (VP (VBD ran) )\n    (. .) ))\n"
BAD = "( (S \n    (NP-SBJ (NNP Bob) \n    (VP (VBD fell) )\n    (. .) ))\n"  # NP-SBJ never closed
GOOD_2 = "( (S \n    (NP-SBJ (NNP Cy) )\n    (VP (VBD sat) ) ))\n"


def test_malformed_file_names_file_and_line(tmp_path):
    path = tmp_path / "wsj_0001.mrg"
    path.write_text(GOOD_1 + BAD + GOOD_2)
    with pytest.raises(TreebankError) as caught:
        read_mrg(path)
    assert caught.value.source == str(path) and caught.value.line == 5
    assert str(caught.value).startswith(f"{path}, line 5: unbalanced brackets")
    trees, errors = read_mrg(path, on_error="skip")
    assert [tree.words() for tree in trees] == [["Ann", "ran", "."], ["Cy", "sat"]]
    assert [(error.source, error.line) for error in errors] == [(str(path), 5)]


@pytest.mark.parametrize(("text", "line", "message"), [
    ("(S (NN a)))\n", 1, "')' closes nothing"),
    ("(S (NN a))\n(S (NN a b))\n", 2, "mixes words"),
    ("(S (NN a))\ngarbage (S (NN b))\n", 2, "text outside brackets"),
    ("(S (NN a))\n\n(S ( a))\n", 3, "has no POS tag"),
    ("(S (NN a))\n(S ())\n", 2, "empty bracket"),
    ("( (S (NN a)\n\n", 1, "not closed"),
])
def test_malformed_trees(tmp_path, text, line, message):
    path = tmp_path / "bad.mrg"
    path.write_text(text)
    with pytest.raises(TreebankError, match=re.escape(message)) as caught:
        read_mrg(path)
    assert caught.value.line == line
    trees, errors = read_mrg(path, on_error="skip")
    assert len(errors) == 1 and errors[0].line == line
    assert trees[:1] == [parse_tree("(S (NN a))")] or line == 1


def test_text_before_the_first_tree(tmp_path):
    path = tmp_path / "lead.mrg"
    path.write_text("\n* header *\n" + GOOD_1)
    trees, errors = read_mrg(path, on_error="skip")
    assert [tree.words() for tree in trees] == [["Ann", "ran", "."]]
    assert [(error.line, error.message) for error in errors] == [(2, "text outside brackets: '*'")]
    path.write_text("\n\n" + GOOD_1)
    assert read_mrg(path)[0] == trees


def test_malformed_corpus_file_in_splits(tmp_path, caplog):
    (tmp_path / "02").mkdir()
    (tmp_path / "02" / "wsj_0200.mrg").write_text(GOOD_1 + BAD + GOOD_2)
    with pytest.raises(TreebankError, match="wsj_0200.mrg, line 5"):
        load_splits(tmp_path)
    assert len(load_splits(tmp_path, on_error="skip")["train"]) == 2
    assert "wsj_0200.mrg, line 5" in caplog.text


def test_parse_tree_rejects_several_and_none():
    with pytest.raises(TreebankError, match="more than one tree"):
        parse_tree("(S (NN a)) (S (NN b))")
    with pytest.raises(TreebankError, match="no tree"):
        parse_tree("  \n")
    assert len(list(iter_trees("(S (NN a)) (S (NN b))"))) == 2
