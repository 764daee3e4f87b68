"""Trees as labelled span charts, and the best tree of a chart of span scores (CKY).

A span parser (Stern, Andreas & Klein 2017; Kitaev & Klein 2018) scores every span ``(i, j)`` of
a sentence (words ``i .. j-1``) for every constituent label and for "no constituent", and takes
the binary tree whose spans score highest with a chart (CKY) search. Unary chains are one label
(``S+VP``); the root ``TOP`` is implicit, and preterminals (POS tags) are a tagger's, so a span
of one word carries only the chain above its tag (``NP`` over a lone ``NN``).

:func:`span_labels` reads a gold tree into the chart a model is trained on, :func:`cky` finds the
best bracketing of scored spans and :func:`build_tree` turns it back into a :class:`Tree`; the
round trip of a gold chart through them gives the gold tree back (up to n-ary nodes, which the
binary search splits into a chain of unlabelled spans that :func:`build_tree` flattens again).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .tree import ROOT_LABEL, Leaf, Tree

#: Label id 0: the span is not a constituent.
EMPTY = ""
CHAIN = "+"


def span_labels(tree: Tree) -> dict[tuple[int, int], str]:
    """Every constituent of ``tree`` below the root as ``{(i, j): "S+VP"}`` (unary chains joined,
    preterminals left out)."""
    labels: dict[tuple[int, int], str] = {}

    def visit(node: Tree, start: int) -> int:
        chain = []
        while True:
            chain.append(node.label)
            if len(node.children) == 1 and isinstance(node.children[0], Tree):
                node = node.children[0]
            else:
                break
        end = start
        for child in node.children:
            end = end + 1 if isinstance(child, Leaf) else visit(child, end)
        labels[(start, end)] = CHAIN.join(chain)
        return end

    end = 0
    for child in tree.children:  # the root (TOP) itself is implicit
        end = end + 1 if isinstance(child, Leaf) else visit(child, end)
    return labels


def cky(scores: np.ndarray) -> tuple[float, dict[tuple[int, int], int]]:
    """The binary bracketing of ``n`` words whose spans' scores sum highest.

    ``scores``: ``[n + 1, n + 1]``, ``scores[i, j]`` the score of span ``(i, j)`` (``i < j``),
    already the best over its labels (a span left unlabelled scores 0, so a label is only taken
    where it beats "no constituent"). Returns the best total and the split point of every span of
    the tree (``{(i, j): k}``; none for single words).
    """
    n = scores.shape[0] - 1
    best = np.zeros((n + 1, n + 1), np.float64)
    split = np.zeros((n + 1, n + 1), np.int64)
    idx = np.arange(n)
    best[idx, idx + 1] = scores[idx, idx + 1]
    for length in range(2, n + 1):
        starts = np.arange(n - length + 1)
        # candidates[s, m]: span (start, start + length) split at start + m + 1
        mids = starts[:, None] + np.arange(1, length)[None, :]
        candidates = best[starts[:, None], mids] + best[mids, starts[:, None] + length]
        choice = candidates.argmax(axis=1)
        ends = starts + length
        best[starts, ends] = candidates[starts, choice] + scores[starts, ends]
        split[starts, ends] = mids[starts, choice]
    splits: dict[tuple[int, int], int] = {}
    stack = [(0, n)] if n > 1 else []
    while stack:
        i, j = stack.pop()
        k = int(split[i, j])
        splits[(i, j)] = k
        stack.extend(span for span in ((i, k), (k, j)) if span[1] - span[0] > 1)
    return float(best[0, n]), splits


def build_tree(words: Sequence[str], tags: Sequence[str], splits: dict[tuple[int, int], int],
               label_of: dict[tuple[int, int], str]) -> Tree:
    """The tree of a bracketing: every span of ``splits`` (and every single word) becomes the chain
    ``label_of[span]`` above its children, or is flattened into its parent when unlabelled."""
    if len(words) != len(tags):
        raise ValueError(f"{len(words)} words but {len(tags)} tags")
    if not words:
        raise ValueError("cannot build the tree of an empty sentence")

    def node(i: int, j: int) -> list[Tree | Leaf]:
        if j - i == 1:
            children: list[Tree | Leaf] = [Leaf(tags[i], words[i])]
        else:
            k = splits[(i, j)]
            children = node(i, k) + node(k, j)
        label = label_of.get((i, j), EMPTY)
        if label == EMPTY:
            return children
        for part in reversed(label.split(CHAIN)):
            children = [Tree(part, tuple(children))]
        return children

    return Tree(ROOT_LABEL, tuple(node(0, len(words))))


def best_tree(words: Sequence[str], tags: Sequence[str], log_probs: np.ndarray, labels: Sequence[str],
              bias: float = 0.0) -> Tree:
    """The highest-scoring tree of one sentence from its span label log-probabilities.

    ``log_probs``: ``[n + 1, n + 1, len(labels)]`` (only ``i < j`` read), ``labels[0]`` =
    :data:`EMPTY`. A span's score is the log-odds that it is a constituent (any label against
    none) plus ``bias``, floored at 0, where it is no constituent (Stern et al. 2017's chart
    parser); a constituent takes its most probable label. Trained locally on every span, most of
    them empty, the classifier is shy of constituents (precision far above recall); a positive
    ``bias``, chosen on the dev files, evens them out.
    """
    n = len(words)
    if labels[0] != EMPTY:
        raise ValueError("labels[0] must be the empty label")
    log_probs = np.asarray(log_probs, np.float64)[: n + 1, : n + 1]
    empty = log_probs[:, :, 0]
    constituent = np.log(np.clip(-np.expm1(empty), 1e-12, None))  # log(1 - p(empty))
    odds = constituent - empty + bias
    _, splits = cky(np.maximum(odds, 0.0))
    label_ids = log_probs[:, :, 1:].argmax(axis=-1) + 1
    label_of = {span: labels[int(label_ids[span])] for span in [*splits, *((i, i + 1) for i in range(n))]
                if odds[span] > 0}
    return build_tree(words, tags, splits, label_of)
