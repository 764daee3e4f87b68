"""EVALB/COLLINS.prm scorer (pipelines/tasks/parsing/evalb.py) on hand-worked cases, the toy treebank and the sample."""

import pytest

from pipelines.tasks.parsing.evalb import (
    ERROR,
    OK,
    SKIP,
    most_frequent_label,
    most_frequent_label_baseline,
    right_branching,
    score_sentence,
    score_trees,
)
from pipelines.tasks.parsing.tree import Leaf, Tree, parse_tree

# Scored brackets: S[0,6] NP[0,2] VP[2,6] PP[3,6] NP[4,6]; 6 scored words, length 7 with the period.
GOLD = "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))"


def line(gold: str, test: str | None, **kwargs) -> dict:
    return score_sentence(1, parse_tree(gold, normalize=False),
                          None if test is None else parse_tree(test, normalize=False), **kwargs)


def counts(record: dict) -> tuple:
    return record["status"], record["matched"], record["gold_brackets"], record["test_brackets"]


def test_identical():
    record = line(GOLD, GOLD)
    assert counts(record) == (OK, 5, 5, 5)
    assert (record["length"], record["words"], record["correct_tags"]) == (7, 6, 6)
    assert record["recall"] == record["precision"] == record["tagging_accuracy"] == 100.0


def test_punctuation_moved_is_ignored():
    # The period attached inside VP: counting it would make VP [2,7] instead of [2,6].
    moved = "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat))) (. .))))"
    assert counts(line(GOLD, moved)) == (OK, 5, 5, 5)
    # A constituent of punctuation only spans no scored word and is no bracket.
    only_punct = "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (FRAG (. .))))"
    assert counts(line(GOLD, only_punct)) == (OK, 5, 5, 5)


def test_advp_prt_are_equal_labels():
    gold = "(TOP (S (NP (PRP He)) (VP (VBD gave) (PRT (RP up))) (. .)))"
    assert counts(line(gold, gold.replace("PRT", "ADVP"))) == (OK, 4, 4, 4)
    assert counts(line(gold, gold.replace("PRT", "ADVP-TMP"))) == (OK, 4, 4, 4)
    assert counts(line(gold, gold.replace("PRT", "NP"))) == (OK, 3, 4, 4)


def test_function_tags_indices_and_empty_elements():
    raw = "(TOP (S-1 (NP-SBJ-1 (DT The) (NN cat)) (VP (VBD sat) (PP-LOC=2 (IN on) (NP (DT the) (NN mat)))) (. .)))"
    assert counts(line(raw, GOLD)) == (OK, 5, 5, 5)
    assert counts(line(GOLD, raw)) == (OK, 5, 5, 5)
    # Raw PTB gold: the trace's NP-SBJ spans nothing; -NONE- is not counted in the length; '!' tagged '.'.
    with_trace = "( (S (NP-SBJ (-NONE- *)) (VP (VB Sit) (PRT (RB down))) (. !)) )"
    record = line(with_trace, "(TOP (S (VP (VB Sit) (ADVP (RB down))) (. !)))")
    # The unlabelled root bracket of the raw line is scored, as EVALB does (only TOP is deleted).
    assert counts(record) == (OK, 3, 4, 3)
    assert (record["length"], record["words"]) == (3, 2)


def test_pos_only_changes():
    retagged = GOLD.replace("(NN cat)", "(NNS cat)").replace("(VBD sat)", "(VBZ sat)").replace("(. .)", "(: .)")
    record = line(GOLD, retagged)
    assert counts(record) == (OK, 5, 5, 5)
    assert (record["words"], record["correct_tags"]) == (6, 4)
    assert record["tagging_accuracy"] == pytest.approx(66.6667, abs=1e-3)


def test_extra_and_missing_brackets():
    extra = GOLD.replace("(NP (DT the) (NN mat))", "(NP (DT the) (ADJP (NN mat)))")
    record = line(GOLD, extra)
    assert counts(record) == (OK, 5, 5, 6)
    assert (record["recall"], record["precision"]) == (100.0, pytest.approx(83.3333, abs=1e-3))
    missing = GOLD.replace("(PP (IN on) (NP (DT the) (NN mat)))", "(IN on) (NP (DT the) (NN mat))")
    record = line(GOLD, missing)
    assert counts(record) == (OK, 4, 5, 4)
    assert (record["recall"], record["precision"]) == (80.0, 100.0)
    result = score_trees([parse_tree(GOLD)] * 3, [parse_tree(GOLD), parse_tree(extra), parse_tree(missing)])
    total = result["all"]
    assert (total["matched"], total["gold_brackets"], total["test_brackets"]) == (14, 15, 15)
    for key in ("recall", "precision", "fmeasure"):
        assert total[key] == pytest.approx(100 * 14 / 15)
    assert total["complete_match"] == pytest.approx(100 / 3)


def test_brackets_match_as_a_multiset():
    gold = "(TOP (S (VP (VP (VB go)))))"
    assert counts(line(gold, "(TOP (S (VP (VB go))))")) == (OK, 2, 3, 2)
    assert counts(line(gold, "(TOP (S (VP (VP (VP (VB go))))))")) == (OK, 3, 3, 4)


def test_error_and_skip_sentences_left_out():
    other_word = line(GOLD, GOLD.replace("cat", "dog"))
    assert other_word["status"] == ERROR and other_word["error"] == "Words unmatch (cat|dog)"
    shorter = line(GOLD, GOLD.replace(" (DT The)", ""))
    assert shorter["status"] == ERROR and shorter["error"] == "Length unmatch (6|5)"
    assert line(GOLD, None)["status"] == SKIP
    assert line(GOLD, "(TOP (S (. .)))")["status"] == SKIP  # no scored test word
    gold = [parse_tree(GOLD)] * 4
    test = [parse_tree(GOLD), parse_tree(GOLD.replace("cat", "dog")), None, parse_tree(GOLD)]
    result = score_trees(gold, test)
    summary = result["all"]
    assert [record["status"] for record in result["per_sentence"]] == [OK, ERROR, SKIP, OK]
    assert (summary["sentences"], summary["error_sentences"], summary["skip_sentences"],
            summary["valid_sentences"]) == (4, 1, 1, 2)
    assert (summary["matched"], summary["gold_brackets"], summary["words"]) == (10, 10, 12)
    assert summary["fmeasure"] == 100.0 and summary["complete_match"] == 100.0
    with pytest.raises(ValueError, match="2 gold trees but 1 test"):
        score_trees(gold[:2], test[:1])


def _flat(n: int, structured: bool) -> Tree:
    leaves = [Leaf("NN", f"w{i}") for i in range(n)]
    children = (Tree("NP", tuple(leaves[: n // 2])), Tree("VP", tuple(leaves[n // 2:]))) if structured else leaves
    return Tree("TOP", (Tree("S", (*children, Leaf(".", "."))),))


def test_cutoff_uses_gold_length_with_punctuation():
    # 39 words + period = 40 (in len<=40); 40 words + period = 41 (out), though 40 words are scored.
    gold = [_flat(39, True), _flat(40, True), _flat(40, True)]
    test = [_flat(39, True), _flat(40, False), Tree("TOP", (Tree("S", (Leaf("NN", "x"),)),))]
    result = score_trees(gold, test)
    assert [record["length"] for record in result["per_sentence"]] == [40, 41, 41]
    assert result["all"]["sentences"] == 3 and result["all"]["error_sentences"] == 1
    assert (result["all"]["matched"], result["all"]["gold_brackets"], result["all"]["test_brackets"]) == (4, 6, 4)
    short = result["len<=40"]
    assert (short["sentences"], short["error_sentences"], short["valid_sentences"]) == (1, 0, 1)
    assert short["fmeasure"] == 100.0 and short["words"] == 39
    # Empty elements do not count: 40 words and a -NONE- element make length 40.
    with_trace = Tree("TOP", (Tree("S", (*_flat(40, True).children[0].children[:2], Leaf("-NONE-", "*"))),))
    assert score_sentence(1, with_trace, with_trace)["length"] == 40
    assert set(score_trees(gold, test, cutoff_len=41)) == {"per_sentence", "all", "len<=41"}


def test_punctuation_by_gold_tags():
    gold = "(TOP (S (NP (NNP Ann)) (VP (VBD left)) (. .)))"
    period_as_noun = "(TOP (S (NP (NNP Ann)) (VP (VBD left) (NN .))))"
    # evalb.c deletes by each tree's own tag: the test keeps 3 words, the gold 2.
    assert line(gold, period_as_noun)["error"] == "Length unmatch (2|3)"
    # With the gold tags deciding, the test's '.' is removed too and VP spans [1,2] in both trees.
    record = line(gold, period_as_noun, punctuation="gold")
    assert counts(record) == (OK, 3, 3, 3) and record["correct_tags"] == 2
    verb_as_period = "(TOP (S (NP (NNP Ann)) (VP (. left)) (. .)))"
    assert line(gold, verb_as_period)["status"] == ERROR
    record = line(gold, verb_as_period, punctuation="gold")
    assert counts(record) == (OK, 3, 3, 3) and record["correct_tags"] == 1
    assert line(gold, gold.replace("left", "right"), punctuation="gold")["status"] == ERROR


def test_gold_against_gold_on_the_toy_test_split(toy_splits):
    test_split = toy_splits["test"]
    result = score_trees(test_split, test_split)
    for section in ("all", "len<=40"):
        summary = result[section]
        assert summary["fmeasure"] == summary["complete_match"] == summary["tagging_accuracy"] == 100.0
        assert summary["error_sentences"] == summary["skip_sentences"] == 0
    assert result["all"]["sentences"] == result["len<=40"]["sentences"] == 60
    assert result["all"]["words"] < sum(len(tree.words()) for tree in test_split)  # punctuation not scored


def test_baselines(toy_splits):
    assert right_branching(["a", "b", "c"], ["DT", "NN", "."]).to_string() == "(TOP (S (DT a) (S (NN b) (. c))))"
    assert right_branching(["a"], ["NN"]) == Tree("TOP", (Tree("S", (Leaf("NN", "a"),)),))
    assert right_branching([], []) == Tree("TOP")
    gold = toy_splits["test"]
    assert most_frequent_label(gold) == "NP"
    baseline = most_frequent_label_baseline(gold)
    assert [tree.words() for tree in baseline] == [tree.words() for tree in gold]
    assert {node.label for node in baseline[0].children} == {"NP"}


def test_baselines_on_the_sample_equal_evalb(sample_splits):
    gold = sample_splits["test"]
    assert len(gold) == 245 and sum(len(tree.words()) <= 40 for tree in gold) == 230
    assert most_frequent_label(gold) == "NP"
    # Reference values, identical to evalb.c with COLLINS.prm run on the same files.
    assert round(score_trees(gold, most_frequent_label_baseline(gold))["all"]["fmeasure"], 2) == 43.71
    branching = [right_branching(tree.words(), tree.tags()) for tree in gold]
    assert round(score_trees(gold, branching)["all"]["fmeasure"], 2) == 8.97


def test_unscored_sentences_are_one_log_line_not_one_each(caplog):
    gold = [parse_tree(GOLD)] * 3
    test = [parse_tree(GOLD.replace("cat", "dog")), parse_tree(GOLD.replace(" (DT The)", "")), parse_tree(GOLD)]
    with caplog.at_level("INFO", logger="pipelines.tasks.parsing.evalb"):
        score_trees(gold, test)
    lines = [r for r in caplog.records if r.name == "pipelines.tasks.parsing.evalb"]
    assert len(lines) == 1 and lines[0].levelname == "WARNING"
    assert lines[0].getMessage() == ("2 of 3 sentences not scored (punctuation 'each'), e.g. sentence 1: "
                                     "Words unmatch (cat|dog)")
