"""Decoding constraints: token masks that follow each hypothesis, for outputs with a grammar.

A sequence-to-sequence parser (section 6.3; Vinyals et al. 2015) writes a tree as brackets and
one slot per word: ``(S (NP NNP NNP )NP (VP VBZ )VP . )S``. An undertrained model miscounts the
slots or leaves brackets open, and then its output is not a tree over the sentence. A
:class:`BracketConstraint` makes every finished hypothesis one: exactly ``slots`` slot tokens,
every closer matching the innermost open bracket, no empty bracket, end of sequence only when
all brackets are closed and all slots written. It is applied inside the beam search as an
additive mask on the log-probabilities, and its state (slots left, open brackets) is part of the
search state, so it follows the surviving beams like the decoder's cache.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from keras_transformer.decoding.greedy import NEG_INF


class BracketConstraint:
    """Balanced, labelled brackets around exactly ``slots`` slot tokens per sentence.

    Args:
        vocab_size: the target vocabulary size.
        slot_ids: ids of the slot tokens (POS tags standing for the words).
        open_ids: ids of the opening brackets; ``close_ids[i]`` closes ``open_ids[i]``.
        close_ids: ids of the matching closing brackets.
        eos_id: end of sequence.
        max_depth: brackets nested deeper are not opened.
    """

    def __init__(self, vocab_size: int, slot_ids: Sequence[int], open_ids: Sequence[int],
                 close_ids: Sequence[int], eos_id: int, max_depth: int = 64):
        if len(open_ids) != len(close_ids) or not open_ids or not slot_ids:
            raise ValueError("need slot ids and as many closing as opening bracket ids")
        self.vocab_size = int(vocab_size)
        self.eos_id = int(eos_id)
        self.max_depth = int(max_depth)
        self._slot_ids = [int(i) for i in slot_ids]
        self._open_ids = [int(i) for i in open_ids]
        self._close_ids = [int(i) for i in close_ids]

    def _vectors(self):
        def indicator(ids):
            return tf.scatter_nd(tf.constant(ids, tf.int32)[:, None], tf.ones([len(ids)], tf.int32),
                                 [self.vocab_size])

        # bracket_of[token]: 1 + the bracket kind a token opens or closes (0: none).
        kinds = tf.range(1, len(self._open_ids) + 1)
        bracket_of = tf.scatter_nd(tf.constant(self._open_ids + self._close_ids, tf.int32)[:, None],
                                   tf.concat([kinds, kinds], 0), [self.vocab_size])
        return indicator(self._slot_ids), indicator(self._open_ids), indicator(self._close_ids), bracket_of

    def initial_state(self, slots) -> dict[str, tf.Tensor]:
        """State for hypotheses needing ``slots`` (``[rows]`` int) slot tokens."""
        slots = tf.cast(slots, tf.int32)
        rows = tf.shape(slots)[0]
        return {"left": slots, "depth": tf.zeros([rows], tf.int32),
                "stack": tf.zeros(tf.stack([rows, self.max_depth + 1]), tf.int32),
                "opened": tf.zeros([rows], tf.bool)}

    def update(self, state, tokens) -> dict[str, tf.Tensor]:
        """The state after each row appended ``tokens`` (``[rows]``; BOS and others change nothing)."""
        is_slot, is_open, is_close, bracket_of = self._vectors()
        tokens = tf.cast(tokens, tf.int32)
        slot, opens, closes = (tf.gather(v, tokens) for v in (is_slot, is_open, is_close))
        # Clipped: a hypothesis the mask ruled out can still fill an empty beam slot (at -inf,
        # never chosen in the end), and its state must stay a valid index.
        depth = tf.clip_by_value(state["depth"] + opens - closes, 0, self.max_depth)
        # An opening bracket writes its kind at its depth; a closer only lowers the depth.
        column = tf.one_hot(depth, self.max_depth + 1, dtype=tf.int32)
        stack = tf.where(tf.cast(column * opens[:, None], tf.bool),
                         tf.gather(bracket_of, tokens)[:, None], state["stack"])
        return {"left": state["left"] - slot, "depth": depth, "stack": stack, "opened": opens > 0}

    def mask(self, state) -> tf.Tensor:
        """Additive ``[rows, vocab]`` mask: 0 where a token keeps the output completable, -inf elsewhere."""
        is_slot, is_open, is_close, bracket_of = self._vectors()
        left, depth = state["left"][:, None], state["depth"][:, None]
        innermost = tf.gather(state["stack"], state["depth"], batch_dims=1)[:, None]
        vocab = tf.range(self.vocab_size)[None, :]
        allow_slot = (is_slot[None, :] > 0) & (left > 0)
        # A bracket opens only if a word is left to put in it, and not too deep.
        allow_open = (is_open[None, :] > 0) & (left > 0) & (depth < self.max_depth)
        # A closer matches the innermost open bracket, which must not be empty.
        allow_close = ((is_close[None, :] > 0) & (depth > 0) & (bracket_of[None, :] == innermost)
                       & ~state["opened"][:, None])
        allow_eos = (vocab == self.eos_id) & (left <= 0) & (depth == 0)
        allowed = allow_slot | allow_open | allow_close | allow_eos
        return tf.where(allowed, 0.0, NEG_INF)

    def wrap(self, score_fn):
        """``score_fn`` with this constraint; its state becomes ``(model_state, constraint_state)``."""

        def constrained(ids, step, state):
            model_state, constraint_state = state
            constraint_state = self.update(constraint_state, ids[:, step])
            log_probs, model_state = score_fn(ids, step, model_state)
            return log_probs + self.mask(constraint_state), (model_state, constraint_state)

        return constrained
