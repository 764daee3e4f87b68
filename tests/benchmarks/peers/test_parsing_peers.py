"""The parsing peers' benchmark (benchmarks/peers/bench_parsing_peers.py) on hand-written trees: no treebank needed.

The PCFG must parse its own training sentences back (F1 >= 90), un-binarisation must invert
binarisation exactly, unknown words must be tagged by their shape, and supar's ``.pid`` files must
read back as the trees written. supar itself is not run here (its virtualenv is outside the repo).
"""

from __future__ import annotations

import itertools
import json

import pytest

from benchmarks.peers import bench_parsing_peers, pcfg_peer, supar_peer
from pipelines.tasks.parsing.evalb import score_trees
from pipelines.tasks.parsing.tree import Leaf, Tree, parse_tree

main = bench_parsing_peers.main
_pcfg, _supar = pcfg_peer, supar_peer
PCFG, binarize, signature, unbinarize = _pcfg.PCFG, _pcfg.binarize, _pcfg.signature, _pcfg.unbinarize
read_pid, write_pid = _supar.read_pid, _supar.write_pid

SUBJECTS = ["(NP (DT the) (NN dog))", "(NP (DT a) (JJ big) (NN cat))", "(NP (NNP John))", "(NP (PRP it))",
            "(NP (DT the) (NNS birds))"]
PREDICATES = ["(VP (VBZ barks))", "(VP (VBZ sees) (NP (DT the) (NN ball)))",
              "(VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat))))", "(VP (MD will) (VP (VB run)))",
              "(VP (VBD gave) (NP (PRP him)) (NP (DT a) (NN bone)))"]
SPECIAL = [
    "(TOP (S (NP (NNP Mary)) (VP (VBD said) (SBAR (IN that) (S (NP (DT the) (NN dog)) (VP (VBZ barks))))) (. .)))",
    "(TOP (S (VP (VB Go) (ADVP (RB home))) (. .)))",
    "(TOP (FRAG (NP (NN Hello))))",
    "(TOP (S (NP (NP (DT the) (NN dog)) (, ,) (NP (NNP Rex)) (, ,)) (VP (VBZ barks)) (. .)))",
    "(TOP (S (NP (DT the) (NN cat)) (VP (VBZ is) (VP (VBG running))) (. .)))",
    "(TOP (S (NP (NNP John)) (VP (VBZ is) (VP (VBG eating))) (. .)))",
    "(TOP (S (NP (PRP it)) (VP (VBZ is) (VP (VBG singing))) (. .)))",
    "(TOP (S (NP (DT the) (NNS birds)) (VP (VBD were) (VP (VBG flying) (PP (IN over) (NP (DT the) (NN mat))))) (. .)))",
]


def hand_trees() -> list[Tree]:
    """33 small normalised trees: every subject with every predicate, and a few with SBAR, unary chains, commas."""
    combos = [f"(TOP (S {np} {vp} (. .)))" for np, vp in itertools.product(SUBJECTS, PREDICATES)]
    return [parse_tree(text) for text in combos + SPECIAL]


@pytest.mark.parametrize(("horizontal", "vertical"), [(1, 1), (2, 1), (1, 2), (2, 2), (3, 2)])
def test_unbinarize_inverts_binarize(horizontal, vertical):
    for tree in hand_trees():
        binary = binarize(tree, horizontal, vertical)
        stack = [binary]
        while stack:
            node = stack.pop()
            assert 1 <= len(node.children) <= 2
            if len(node.children) == 1:  # unary chains are collapsed: only phrase -> tag is left
                assert isinstance(node.children[0], Leaf), node.label
            stack.extend(child for child in node.children if isinstance(child, Tree))
        assert unbinarize(binary) == tree
    # the chain TOP -> FRAG -> NP -> NN becomes one label and comes back as three nodes
    assert binarize(parse_tree("(TOP (FRAG (NP (NN Hello))))")).label == "TOP+FRAG+NP"


def test_parent_annotation_and_markov_symbols():
    tree = parse_tree("(TOP (S (NP (DT a) (JJ big) (JJ red) (NN dog)) (VP (VBZ barks)) (. .)))")
    binary = binarize(tree, horizontal=1, vertical=2)
    assert binary.label == "TOP+S"
    subject = binary.children[0]
    assert subject.label == "NP^S"
    assert subject.children[1].label == "@NP^S|<JJ>"  # remembers its parent and the next child only
    assert binarize(tree, horizontal=2).children[0].children[1].label == "@NP|<JJ~JJ>"


def test_signatures_of_unknown_words():
    assert signature("running") == "UNK-LC-ing"
    assert signature("walked") == "UNK-LC-ed"
    assert signature("quickly") == "UNK-LC-ly"
    assert signature("dogs") == "UNK-LC-s"
    assert signature("glass") == "UNK-LC"
    assert signature("Cambridge") == "UNK-INITC"
    assert signature("Cambridge", first=True) == "UNK-FIRSTC"
    assert signature("IBM") == "UNK-CAPS"
    assert signature("1987") == "UNK-NUM"
    assert signature("well-known") == "UNK-LC-DASH"
    assert signature("3-for-2") == "UNK-LC-NUM-DASH"


def test_pcfg_parses_its_training_sentences_back():
    trees = hand_trees()
    for horizontal, vertical in ((1, 1), (2, 2)):
        grammar = PCFG(horizontal, vertical).fit(trees)
        parsed = [grammar.parse(tree.words()) for tree in trees]
        assert all(tree is not None for tree in parsed)
        scores = score_trees(trees, parsed, punctuation="gold")["all"]
        assert scores["fmeasure"] >= 90, scores
        assert scores["tagging_accuracy"] >= 95, scores


def test_pcfg_tags_unknown_words_by_their_shape():
    grammar = PCFG().fit(hand_trees())
    # running, eating, singing, flying were each seen once, as VBG: an unseen -ing word is a VBG
    parsed = grammar.parse("the dog is jumping .".split())
    assert parsed is not None
    assert parsed.tags() == ["DT", "NN", "VBZ", "VBG", "."]
    assert parsed == parse_tree("(TOP (S (NP (DT the) (NN dog)) (VP (VBZ is) (VP (VBG jumping))) (. .)))")
    assert grammar.parse([]) is None
    flat = grammar.flat_tree(["John", "sat", "zorped"])
    assert flat.words() == ["John", "sat", "zorped"] and flat.tags()[:2] == ["NNP", "VBD"]


def test_pid_files_round_trip(tmp_path):
    trees = hand_trees()
    path = write_pid(trees, tmp_path / "train.pid")
    lines = path.read_text().splitlines()
    assert len(lines) == len(trees) and all(line.startswith("(TOP (") for line in lines)
    assert read_pid(path) == trees


def test_smoke_run_of_main(tmp_path, capsys):
    trees = hand_trees()
    folder = tmp_path / "treebank" / "combined"
    folder.mkdir(parents=True)
    for name, part in (("wsj_0001.mrg", trees), ("wsj_0160.mrg", trees[::4]), ("wsj_0180.mrg", trees[1::5])):
        (folder / name).write_text("".join(tree.to_string() + "\n" for tree in part))
    output = tmp_path / "report.json"
    assert main(["--treebank", str(tmp_path / "treebank"), "--smoke", "--supar-venv", str(tmp_path / "no-venv"),
                 "--output", str(output)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report == json.loads(output.read_text())
    assert report["split_sizes"] == {"train": len(trees), "dev": len(trees[::4]), "test": 5}  # smoke: 5 test trees
    pcfg = report["peers"]["pcfg"]
    assert len(pcfg["dev_selection"]) == 4 and pcfg["fallback_flat_trees"] == 0
    assert pcfg["scores"]["all"]["fmeasure"] >= 90
    supar = report["peers"]["supar"]
    assert supar["pid_round_trip"] is True and supar["trained"] is False


def test_supar_log_and_missing_predictions(tmp_path):
    align, supar_epochs = bench_parsing_peers.align, supar_peer.supar_epochs
    # the lines of supar's model.train.log that count (its format as of supar-bauwenst 1.2.1)
    metric = "UCM:  0.00% LCM:  0.00% UP: 10.00% UR: 10.00% UF: 10.00% LP: {0}% LR: {0}% LF: {0}%"
    log = tmp_path / "model.train.log"
    log.write_text("[INFO] dev: /tmp/dev.pid\n[INFO] dev:   Dataset(n_sentences=10)\n"
                   f"[INFO] Epoch 1 / 1000:\n[INFO] dev:  loss: 3.2 - {metric.format('12.50')}\n"
                   f"[INFO] test: loss: 3.1 - {metric.format('11.00')}\n[INFO] 0:00:14.7s elapsed (saved)\n\n"
                   f"[INFO] Epoch 2 / 1000:\n[INFO] dev:  loss: 3.0 - {metric.format(' 9.00')}\n"
                   "[INFO] 0:00:13.1s elapsed\n\n[INFO] Epoch 3 / 1000:\n")
    assert supar_epochs(log) == [{"epoch": 1, "dev_labelled_f1": 12.5, "finished": True, "saved": True},
                                 {"epoch": 2, "dev_labelled_f1": 9.0, "finished": True, "saved": False},
                                 {"epoch": 3, "dev_labelled_f1": None, "finished": False, "saved": False}]
    trees = hand_trees()[:4]
    assert align(trees, trees) == (trees, 0)
    assert align(trees, [trees[0], trees[2], trees[3]]) == ([trees[0], None, trees[2], trees[3]], 1)
