"""Labelled-bracket scoring equal to EVALB with COLLINS.prm (Sekine and Collins, 1997), paper section 6.3.

The paper's Table 4 reports F1 on WSJ section 23; the standard scorer of that number is EVALB with
the parameter file COLLINS.prm. This module reproduces ``evalb -p COLLINS.prm``
(evalb.c ``read_line``, ``massage_data``, ``calc_result``, ``individual_result``, ``print_total``):

* DELETE_LABEL ``TOP -NONE- , : `` '' .``: a preterminal with such a tag is removed with its word,
  so bracket spans are word positions counted without punctuation; a phrase with such a label
  (after label trimming) is not scored; a phrase spanning no remaining word is not scored.
  Like evalb.c, each tree's own tags decide what is removed, so a parse that tags a word as
  punctuation or punctuation as a word is an error sentence; ``punctuation="gold"`` lets the gold
  tags decide for both trees instead (not EVALB's behaviour).
* Phrase labels are cut at the first ``-`` or ``=`` (``NP-SBJ-1`` -> ``NP``, ``modify_label``);
  POS tags are compared as written. Preterminals are not constituents.
* EQ_LABEL ``ADVP PRT``: the two labels match each other.
* Brackets match as a multiset: a test bracket matches at most one gold bracket of the same span
  and equal label.
* A sentence whose test tree has no scored word is skipped (status 2); one whose scored words
  differ in number or spelling from the gold ones is an error sentence (status 1); both are left
  out of the totals. Unlike evalb.c there is no MAX_ERROR abort (every sentence is scored) and no
  limit of 200 words or brackets per sentence. Crossing brackets are counted as evalb.c does.
* Sentence length (CUTOFF_LEN 40, DELETE_LABEL_FOR_LENGTH ``-NONE-``) counts the gold words with
  punctuation, without empty elements.
* Complete match: matched == gold brackets == test brackets. Tagging accuracy is over the scored
  (non-punctuation) words. F-measure is 0 where evalb.c would print nan (no match at all).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import Literal

from .tree import EMPTY_TAG, ROOT_LABEL, Leaf, Tree

logger = logging.getLogger(__name__)

DELETE_LABELS = frozenset({ROOT_LABEL, EMPTY_TAG, ",", ":", "``", "''", "."})
DELETE_LABELS_FOR_LENGTH = frozenset({EMPTY_TAG})
EQ_LABELS = (("ADVP", "PRT"),)
CUTOFF_LEN = 40
_CANONICAL = {second: first for first, second in EQ_LABELS}
OK, ERROR, SKIP = 0, 1, 2
Punctuation = Literal["each", "gold"]


def modify_label(label: str) -> str:
    """evalb.c ``modify_label``: cut at the first ``-`` or ``=``."""
    cut = [i for i in (label.find("-"), label.find("=")) if i >= 0]
    return label[: min(cut)] if cut else label


def _spans(tree: Tree) -> tuple[list[Leaf], list[tuple[int, int, str]]]:
    """Leaves, and (start, end, label) of every phrase (root included) over all leaf positions."""
    leaves: list[Leaf] = []
    spans: list[tuple[int, int, str]] = []
    # Post-order with explicit markers so that each phrase knows its end position.
    stack: list[tuple[Tree | Leaf, int | None]] = [(tree, None)]
    while stack:
        node, start = stack.pop()
        if isinstance(node, Leaf):
            leaves.append(node)
        elif start is None:
            stack.append((node, len(leaves)))
            stack.extend((child, None) for child in reversed(node.children))
        else:
            spans.append((start, len(leaves), node.label))
    return leaves, spans


def _project(leaves: list[Leaf], spans: list[tuple[int, int, str]], keep: list[bool]):
    """Scored terminals and brackets once the unkept words are removed (evalb.c ``massage_data``)."""
    before = [0]
    for kept in keep:
        before.append(before[-1] + kept)
    terminals = [leaf for leaf, kept in zip(leaves, keep) if kept]
    brackets = []
    for start, end, label in spans:
        label = modify_label(label)
        if before[start] != before[end] and label not in DELETE_LABELS:
            brackets.append((before[start], before[end], label))
    return terminals, brackets


def _crossing(gold: list[tuple[int, int, str]], test: list[tuple[int, int, str]]) -> int:
    """Test brackets that cross some gold bracket (counted over test brackets, as evalb.c does)."""
    return sum(
        any(gs < ts < ge < te or ts < gs < te < ge for gs, ge, _ in gold) for ts, te, _ in test
    )


def _same_label(first: str, second: str) -> bool:
    return _CANONICAL.get(first, first) == _CANONICAL.get(second, second)


def _record(number: int, length: int, status: int, error: str | None = None, **counts: int) -> dict:
    counts = {"matched": 0, "gold_brackets": 0, "test_brackets": 0, "crossing": 0, "words": 0,
              "correct_tags": 0, **counts}
    return {
        "id": number, "length": length, "status": status,
        "recall": 100.0 * counts["matched"] / counts["gold_brackets"] if counts["gold_brackets"] else 0.0,
        "precision": 100.0 * counts["matched"] / counts["test_brackets"] if counts["test_brackets"] else 0.0,
        **counts,
        "tagging_accuracy": 100.0 * counts["correct_tags"] / counts["words"] if counts["words"] else 0.0,
        "error": error,
    }


def score_sentence(number: int, gold: Tree, test: Tree | None, punctuation: Punctuation = "each") -> dict:
    """The EVALB line of one sentence: status, bracket counts, words and correct tags."""
    gold_leaves, gold_spans = _spans(gold)
    test_leaves, test_spans = _spans(test) if test is not None else ([], [])
    length = sum(leaf.tag not in DELETE_LABELS_FOR_LENGTH for leaf in gold_leaves)
    gold_keep = [leaf.tag not in DELETE_LABELS for leaf in gold_leaves]
    test_keep = [leaf.tag not in DELETE_LABELS for leaf in test_leaves]
    aligned = True
    if punctuation == "gold":
        gold_real = [(leaf.word, keep) for leaf, keep in zip(gold_leaves, gold_keep) if leaf.tag != EMPTY_TAG]
        test_real = [leaf.word for leaf in test_leaves if leaf.tag != EMPTY_TAG]
        aligned = [word for word, _ in gold_real] == test_real
        if aligned:
            by_gold = iter(keep for _, keep in gold_real)
            test_keep = [leaf.tag != EMPTY_TAG and next(by_gold) for leaf in test_leaves]
    elif punctuation != "each":
        raise ValueError(f"punctuation must be 'each' or 'gold', not {punctuation!r}")
    gold_terms, gold_brackets = _project(gold_leaves, gold_spans, gold_keep)
    test_terms, test_brackets = _project(test_leaves, test_spans, test_keep)
    if not test_terms:
        return _record(number, length, SKIP)
    if len(gold_terms) != len(test_terms) and aligned:
        return _record(number, length, ERROR, f"Length unmatch ({len(gold_terms)}|{len(test_terms)})")
    mismatch = next(((g.word, t.word) for g, t in zip(gold_terms, test_terms) if g.word != t.word), None)
    if mismatch is not None or not aligned:
        detail = f"({mismatch[0]}|{mismatch[1]})" if mismatch else "(gold and test words differ)"
        return _record(number, length, ERROR, f"Words unmatch {detail}")
    gold_count = Counter((s, e, _CANONICAL.get(label, label)) for s, e, label in gold_brackets)
    test_count = Counter((s, e, _CANONICAL.get(label, label)) for s, e, label in test_brackets)
    return _record(
        number, length, OK,
        matched=sum((gold_count & test_count).values()),
        gold_brackets=len(gold_brackets), test_brackets=len(test_brackets),
        crossing=_crossing(gold_brackets, test_brackets), words=len(gold_terms),
        correct_tags=sum(_same_label(g.tag, t.tag) for g, t in zip(gold_terms, test_terms)),
    )


def summarize(records: Sequence[dict]) -> dict:
    """EVALB's summary section (``print_total``) over sentence records."""
    valid = [record for record in records if record["status"] == OK]
    total = {key: sum(record[key] for record in valid)
             for key in ("matched", "gold_brackets", "test_brackets", "crossing", "words", "correct_tags")}
    recall = 100.0 * total["matched"] / total["gold_brackets"] if total["gold_brackets"] else 0.0
    precision = 100.0 * total["matched"] / total["test_brackets"] if total["test_brackets"] else 0.0
    n = len(valid)
    return {
        "sentences": len(records),
        "error_sentences": sum(record["status"] == ERROR for record in records),
        "skip_sentences": sum(record["status"] == SKIP for record in records),
        "valid_sentences": n,
        "recall": recall,
        "precision": precision,
        "fmeasure": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        "complete_match": 100.0 * sum(
            r["matched"] == r["gold_brackets"] == r["test_brackets"] for r in valid) / n if n else 0.0,
        "average_crossing": total["crossing"] / n if n else 0.0,
        "no_crossing": 100.0 * sum(r["crossing"] == 0 for r in valid) / n if n else 0.0,
        "two_or_less_crossing": 100.0 * sum(r["crossing"] <= 2 for r in valid) / n if n else 0.0,
        "tagging_accuracy": 100.0 * total["correct_tags"] / total["words"] if total["words"] else 0.0,
        **total,
    }


def score_trees(gold: Sequence[Tree], test: Sequence[Tree | None], *, cutoff_len: int = CUTOFF_LEN,
                punctuation: Punctuation = "each") -> dict:
    """Score ``test`` against ``gold`` like ``evalb -p COLLINS.prm``.

    Returns ``{"per_sentence": [...], "all": {...}, f"len<={cutoff_len}": {...}}``; a ``None`` test
    tree (a parse that failed) is a skipped sentence, as an empty line is for EVALB.
    """
    if len(gold) != len(test):
        raise ValueError(f"{len(gold)} gold trees but {len(test)} test trees")
    records = [score_sentence(i + 1, g, t, punctuation) for i, (g, t) in enumerate(zip(gold, test))]
    errors = [record for record in records if record["status"] == ERROR]
    for record in errors:
        logger.debug("sentence %d: %s", record["id"], record["error"])
    if errors:
        # One line, not one per sentence (each is in the per-sentence records): with punctuation
        # "each", a punctuation tag predicted unlike gold's is enough to leave a sentence out.
        logger.warning("%d of %d sentences not scored (punctuation %r), e.g. sentence %d: %s", len(errors),
                       len(records), punctuation, errors[0]["id"], errors[0]["error"])
    return {
        "per_sentence": records,
        "all": summarize(records),
        f"len<={cutoff_len}": summarize([r for r in records if r["length"] <= cutoff_len]),
    }


def right_branching(words: Sequence[str], tags: Sequence[str], label: str = "S") -> Tree:
    """Right-branching baseline: ``(TOP (S w1 (S w2 (S ... wn-1 wn))))``, each ``S`` labelled ``label``."""
    if len(words) != len(tags):
        raise ValueError(f"{len(words)} words but {len(tags)} tags")
    leaves = [Leaf(tag, word) for tag, word in zip(tags, words)]
    if not leaves:
        return Tree(ROOT_LABEL)
    node = Tree(label, tuple(leaves[-2:]))
    for leaf in reversed(leaves[:-2]):
        node = Tree(label, (leaf, node))
    return Tree(ROOT_LABEL, (node,))


def most_frequent_label(trees: Sequence[Tree]) -> str:
    """The phrase label (trimmed like EVALB, root excluded) that occurs most often; ties alphabetical."""
    counts: Counter[str] = Counter()
    for tree in trees:
        counts.update(modify_label(label) for _, _, label in _spans(tree)[1][:-1])
    if not counts:
        raise ValueError("no phrase labels in the trees")
    return min(counts, key=lambda label: (-counts[label], label))


def most_frequent_label_baseline(gold_trees: Sequence[Tree], label: str | None = None) -> list[Tree]:
    """The gold trees with every phrase label below the root replaced by the most frequent one.

    Scores the bracketing with labels reduced to a guess: the gap to the gold trees' 100 F1 is what
    labelling contributes. ``label`` defaults to `most_frequent_label` of ``gold_trees``.
    """
    label = label or most_frequent_label(gold_trees)

    def relabel(node: Tree | Leaf) -> Tree | Leaf:
        return node if isinstance(node, Leaf) else Tree(label, tuple(relabel(child) for child in node.children))

    return [Tree(tree.label, tuple(relabel(child) for child in tree.children)) for tree in gold_trees]
