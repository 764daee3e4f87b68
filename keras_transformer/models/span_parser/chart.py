"""Chart decoding of a span parser: the best tree of scored spans, as a linearised tree.

A span parser (``keras_transformer.models.span_parser``; Stern, Andreas & Klein 2017, Kitaev &
Klein 2018) gives every span ``(i, j)`` of a sentence (words ``i .. j-1``) a distribution over
labels, label 0 meaning "no constituent". The best tree is the binary bracketing whose spans
score highest, found by CKY in O(n^3) (:func:`cky`); unlabelled spans of it are flattened into
their parents, so n-ary constituents come out as they are. The result is written in section 6.3's
target form (:mod:`pipelines.tasks.parsing.linearize`: ``(S (NP NNP NNP )NP (VP VBD )VP . )S``),
the form the sequence-to-sequence parser decodes, so one evaluation and one export reader serve
both parsers. Labels of unary chains are joined by ``+`` (``S+VP``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Label 0: the span is not a constituent.
EMPTY = ""
CHAIN = "+"


def cky(scores: np.ndarray) -> tuple[float, dict[tuple[int, int], int]]:
    """The binary bracketing of ``n`` words whose spans' scores sum highest.

    ``scores``: ``[n + 1, n + 1]``, ``scores[i, j]`` the score of span ``(i, j)`` (``i < j``; a
    span that is no constituent scores 0). Returns the best total and the split point of each
    span of the tree longer than one word (``{(i, j): k}``).
    """
    n = scores.shape[0] - 1
    best = np.zeros((n + 1, n + 1), np.float64)
    split = np.zeros((n + 1, n + 1), np.int64)
    words = np.arange(n)
    best[words, words + 1] = scores[words, words + 1]
    for length in range(2, n + 1):
        starts = np.arange(n - length + 1)
        # All spans of one length at once: mids[s, m] is the m-th split point of span s.
        mids = starts[:, None] + np.arange(1, length)[None, :]
        candidates = best[starts[:, None], mids] + best[mids, starts[:, None] + length]
        choice = candidates.argmax(axis=1)
        best[starts, starts + length] = candidates[starts, choice] + scores[starts, starts + length]
        split[starts, starts + length] = mids[starts, choice]
    splits: dict[tuple[int, int], int] = {}
    stack = [(0, n)] if n > 1 else []
    while stack:
        i, j = stack.pop()
        k = int(split[i, j])
        splits[(i, j)] = k
        stack.extend(span for span in ((i, k), (k, j)) if span[1] - span[0] > 1)
    return float(best[0, n]), splits


def decode_chart(log_probs: np.ndarray, tags: Sequence[str], labels: Sequence[str], bias: float = 0.0) -> list[str]:
    """The linearised best tree over ``len(tags)`` words.

    ``log_probs``: ``[n + 1, n + 1, len(labels)]`` span label log-probabilities (only ``i < j``
    read); ``labels[0]`` is :data:`EMPTY`. A span scores the log-odds that it is a constituent (any
    label against none) plus ``bias``, floored at 0, where it is none (Stern et al. 2017's chart
    parser); a constituent takes its most probable label. Trained on every span independently,
    most of them empty, a classifier is shy of constituents (precision well above recall): a
    positive ``bias``, chosen on the dev files, evens the two out.
    """
    n = len(tags)
    if n == 0:
        raise ValueError("cannot decode the chart of an empty sentence")
    if len(labels) < 2 or labels[0] != EMPTY:
        raise ValueError(f"labels must be the empty label and at least one other, got {list(labels)[:3]!r}")
    log_probs = np.asarray(log_probs, np.float64)[: n + 1, : n + 1]
    empty = log_probs[:, :, 0]
    odds = np.log(np.clip(-np.expm1(empty), 1e-12, None)) - empty + bias  # log(1 - p0) - log p0
    _, splits = cky(np.maximum(odds, 0.0))
    best_label = log_probs[:, :, 1:].argmax(axis=-1) + 1

    tokens: list[str] = []
    # Depth-first over the tree's spans; strings on the stack are closing brackets.
    stack: list[tuple[int, int] | str] = [(0, n)]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            tokens.append(item)
            continue
        i, j = item
        chain = labels[int(best_label[i, j])].split(CHAIN) if odds[i, j] > 0 else []
        tokens.extend(f"({label}" for label in chain)
        stack.extend(f"){label}" for label in chain)  # innermost closes first: pushed last
        if j - i == 1:
            tokens.append(tags[i])
        else:
            k = splits[(i, j)]
            stack.extend([(k, j), (i, k)])
    return tokens
