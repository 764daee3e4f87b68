"""The span chart and POS tags of linearised trees, read from their target ids in the graph.

The parsing corpus holds section 6.3's target sequences (``(S (NP NNP NNP )NP (VP VBD )VP . )S``,
:mod:`pipelines.tasks.parsing.linearize`), which the sequence-to-sequence parser learns from. The
span parser (:mod:`keras_transformer.models.span_parser`) learns from the same batches: for each
tree, the label of every span ``(i, j)`` (``0``: no constituent; unary chains such as ``S+VP`` one
label) and the tag of every word. Reading them here, inside the training step, leaves the data,
tokenization and input stages the same for both parsers.

An opening bracket's span starts at the number of slots (POS tags) before it and ends at the
number before its matching closer, the first later closer back at the depth outside it. Directly
nested openers with the same span are one unary chain.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import tensorflow as tf

from keras_transformer.models.span_parser.chart import CHAIN, EMPTY

#: The label id where there is no gold label (no span at ``i >= j`` or past a tree, a word of no known tag):
#: left out of the tree CRF and the tag loss.
IGNORE = -1
#: Longest unary chain with a label of its own (the WSJ's longest is 3); longer ones are ignored.
MAX_CHAIN = 4


def bracket_label(piece: str) -> tuple[str, str] | None:
    """``("(", "NP")`` for ``(NP``, ``(")", "NP")`` for ``)NP``, ``None`` for anything else (a
    SentencePiece word mark ``▁`` in front is ignored)."""
    piece = piece.lstrip("\u2581")
    return (piece[0], piece[1:]) if len(piece) > 1 and piece[0] in "()" else None


def tree_labels(tokens: Sequence[str]) -> set[str]:
    """The span labels of one linearised tree (its tokens): each constituent's, unary chains joined
    by ``+`` outermost first, as :class:`SpanTargets` reads them; unbalanced closers are skipped."""
    opened: list[tuple[str, int]] = []
    chains: dict[tuple[int, int], list[str]] = {}
    slots = 0
    for token in tokens:
        bracket = bracket_label(token)
        if bracket is None:
            slots += 1
        elif bracket[0] == "(":
            opened.append((bracket[1], slots))
        elif opened:
            label, start = opened.pop()
            # Closed innermost first: the chain is built outward.
            chains.setdefault((start, slots), []).insert(0, label)
    return {CHAIN.join(chain) for chain in chains.values()}


def missing_symbols(trees: Iterable[str], target_pieces: Sequence[str]) -> list[str]:
    """The symbols of the linearised ``trees`` that no target piece spells (``▁`` dropped): a
    tag the vocabulary lacks would be read as no word at all and shift the words after it."""
    known = {piece.lstrip("\u2581") for piece in target_pieces}
    return sorted({token for tree in trees for token in tree.split()} - known)


def span_inventory(trees: Iterable[str], target_pieces: Sequence[str], special_ids: Iterable[int]) -> dict:
    """``{"labels": [...], "tags": [...]}`` for a span parser: the labels of the linearised
    ``trees`` (:data:`EMPTY` first, then sorted; chains up to :data:`MAX_CHAIN`) and the tags,
    the target pieces that are neither brackets nor special (``▁`` dropped)."""
    labels: set[str] = set()
    for tree in trees:
        labels |= tree_labels(tree.split())
    special = set(special_ids)
    tags = [piece.lstrip("\u2581") for i, piece in enumerate(target_pieces)
            if i not in special and bracket_label(piece) is None and piece.lstrip("\u2581")
            and not (piece.startswith("<") and piece.endswith(">"))]
    return {"labels": [EMPTY, *sorted(label for label in labels if label.count(CHAIN) < MAX_CHAIN)], "tags": tags}


class SpanTargets:
    """Span label and tag ids of batches of linearised target ids.

    Args:
        target_pieces: the target vocabulary, piece by id.
        labels: the span labels, :data:`~keras_transformer.models.span_parser.chart.EMPTY` first, chains
            joined by ``+`` (the training trees' inventory).
        tags: the POS tags, each a target piece (the tagger's classes, in order).
    """

    def __init__(self, target_pieces: Sequence[str], labels: Sequence[str], tags: Sequence[str]):
        if not labels or labels[0] != EMPTY:
            raise ValueError("span labels must start with the empty label")
        singles = sorted({part for label in labels[1:] for part in label.split(CHAIN)})
        self.base = len(singles) + 1
        single_id = {label: i + 1 for i, label in enumerate(singles)}
        size = len(target_pieces)
        self._open = np.zeros([size], np.int32)  # the opener's label id among the single labels
        self._bracket = np.zeros([size], np.int32)  # +1 opening, -1 closing
        self._tag = np.full([size], IGNORE, np.int32)
        tag_id = {tag: i for i, tag in enumerate(tags)}
        for i, piece in enumerate(target_pieces):
            bracket = bracket_label(piece)
            if bracket is None:
                self._tag[i] = tag_id.get(piece.lstrip("\u2581"), IGNORE)
            elif bracket[0] == "(":
                self._open[i] = single_id.get(bracket[1], 0)
                self._bracket[i] = 1
            else:
                self._bracket[i] = -1
        codes = {}
        for index, label in enumerate(labels[1:], start=1):
            parts = label.split(CHAIN)
            if len(parts) <= MAX_CHAIN:
                codes[sum(single_id[part] * self.base**m for m, part in enumerate(parts))] = index
        order = sorted(codes)
        # A last code no chain has, so that the search always lands on an entry.
        self._codes = np.array([*order, np.iinfo(np.int64).max], np.int64)
        self._code_labels = np.array([*(codes[code] for code in order), IGNORE], np.int32)

    def __call__(self, target_ids) -> tuple[tf.Tensor, tf.Tensor]:
        """``(spans [batch, n + 1, n + 1], tags [batch, n])`` int32 for ``target_ids`` ``[batch,
        length]``, ``n`` the batch's most slots; :data:`IGNORE` outside each tree's ``i < j <= n``,
        for tags past its words and for brackets the vocabulary does not know."""
        ids = tf.cast(target_ids, tf.int32)
        opens = tf.gather(tf.constant(self._open), ids)
        bracket = tf.gather(tf.constant(self._bracket), ids)
        tags = tf.gather(tf.constant(self._tag), ids)
        is_slot = tf.equal(bracket, 0) & (tags != IGNORE)
        is_open = tf.equal(bracket, 1)
        depth = tf.cumsum(bracket, axis=1)  # after each token
        before = tf.cumsum(tf.cast(is_slot, tf.int32), axis=1, exclusive=True)  # slots before it
        length = tf.shape(ids)[1]
        later = tf.range(length)[None, :] > tf.range(length)[:, None]
        match = later[None] & tf.equal(bracket[:, None, :], -1) & tf.equal(depth[:, None, :], depth[:, :, None] - 1)
        closer = tf.argmax(tf.cast(match, tf.int32), axis=2, output_type=tf.int32)
        end = tf.gather(before, closer, batch_dims=1)
        closed = is_open & tf.reduce_any(match, axis=2)

        # Chains: an opener right after an opener of the same span continues its chain.
        def shift(x, m, fill):  # x[:, k + m] at k, ``fill`` past the end
            rest = x[:, m:]
            return tf.concat([rest, tf.fill([tf.shape(x)[0], length - tf.shape(rest)[1]], fill)], axis=1)

        same = (closed[:, 1:] & closed[:, :-1] & tf.equal(before[:, 1:], before[:, :-1])
                & tf.equal(end[:, 1:], end[:, :-1]))
        continues = tf.concat([tf.zeros_like(same[:, :1]), same], axis=1)
        head = closed & tf.logical_not(continues)
        code = tf.zeros_like(ids, tf.int64)
        alive = tf.ones_like(head)
        for m in range(MAX_CHAIN):
            if m:
                alive &= shift(continues, m, False)
            code += tf.where(alive, tf.cast(shift(opens, m, 0), tf.int64) * self.base**m, 0)
        too_long = alive & shift(continues, MAX_CHAIN, False)
        codes = tf.constant(self._codes)
        position = tf.minimum(tf.searchsorted(codes, tf.reshape(code, [-1])), tf.size(codes) - 1)
        found = tf.equal(tf.gather(codes, position), tf.reshape(code, [-1]))
        label = tf.where(found, tf.gather(tf.constant(self._code_labels), position), IGNORE)
        label = tf.where(tf.reshape(too_long, [-1]), IGNORE, label)
        label = tf.reshape(label, tf.shape(ids))

        words = tf.reduce_sum(tf.cast(is_slot, tf.int32), axis=1)
        n = tf.reduce_max(words)
        grid = tf.range(n + 1)
        valid = (grid[None, :, None] < grid[None, None, :]) & (grid[None, None, :] <= words[:, None, None])
        spans = tf.where(valid, 0, IGNORE)
        where = tf.where(head)
        batch = tf.cast(where[:, 0], tf.int32)
        spans = tf.tensor_scatter_nd_update(
            spans, tf.stack([batch, tf.gather_nd(before, where), tf.gather_nd(end, where)], axis=1),
            tf.gather_nd(label, where))
        slot_at = tf.where(is_slot)
        word_tags = tf.tensor_scatter_nd_update(
            tf.fill([tf.shape(ids)[0], n], IGNORE),
            tf.stack([tf.cast(slot_at[:, 0], tf.int32), tf.gather_nd(before, slot_at)], axis=1),
            tf.gather_nd(tags, slot_at))
        return spans, word_tags
