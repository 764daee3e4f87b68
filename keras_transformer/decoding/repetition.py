"""A decoding guard against loops: no third copy in a row of an n-gram of pieces begins.

An undertrained decoder falls into loops ("Network Network Network ...", "ununununun"): its next
token keeps continuing what it has just written (Holtzman et al., 2020). The guard is the smallest
rule that rules them out: once an n-gram of pieces (n <= ``max_period``) stands twice in a row, the
next token may not begin a third copy of it. Unlike blocking every repeated n-gram
(``no_repeat_ngram_size`` in other libraries), two copies in a row stay allowed ("very very", "1.1").
Stopping the third copy at its first piece rather than its last matters for lists: "Kerberos,
Kerberos, Kerberos" is a loop to a reader (and to the evaluation's loop counter, which reads words
and skips punctuation), but the third copy of the pieces "Kerberos ," is only complete at a comma
that need never come, so stopping that comma alone leaves such loops. It is a decoding
setting (``DecodingSettings.repetition_guard``), on in every translation preset.

It has the interface of :class:`~keras_transformer.decoding.constraints.BracketConstraint` (``wrap``,
``initial_state``), so beam search, the :class:`~keras_transformer.decoding.translator.Translator` and the
export apply it alike; it reads the hypotheses' ids and keeps no state of its own.
"""

from __future__ import annotations

from functools import lru_cache

import tensorflow as tf

from keras_transformer.decoding.greedy import NEG_INF

TIMES = 3


class RepetitionGuard:
    """Masks the token that would begin copy ``TIMES`` in a row of an n-gram, n <= ``max_period``.

    Args:
        vocab_size: the target vocabulary size.
        max_period: the longest repeated n-gram (in pieces) it stops.
    """

    #: No per-sentence input: a translator passes none.
    takes_slots = False

    def __init__(self, vocab_size: int, max_period: int = 8):
        if int(max_period) < 1:
            raise ValueError(f"repetition_guard must be a positive n-gram length, got {max_period!r}")
        self.vocab_size = int(vocab_size)
        self.max_period = int(max_period)

    def initial_state(self, slots) -> tf.Tensor:
        return tf.zeros_like(tf.cast(slots, tf.int32))

    def mask(self, ids, step) -> tf.Tensor:
        """Additive ``[rows, vocab]`` mask for the token after ``ids[:, 1 : step + 1]`` (``ids[:, 0]`` is BOS)."""
        step = tf.cast(step, tf.int32)
        banned = tf.zeros(tf.stack([tf.shape(ids)[0], self.vocab_size]), tf.float32)
        for m in range(1, self.max_period + 1):
            # The last (TIMES - 1) * m tokens are TIMES - 1 copies of one m-gram: the next token may
            # not be that m-gram's first, ids[step - m + 1].
            first = step - (TIMES - 1) * m + 1
            positions = tf.maximum(first + tf.range((TIMES - 2) * m), 0)
            periodic = tf.reduce_all(tf.equal(tf.gather(ids, positions, axis=1),
                                              tf.gather(ids, positions + m, axis=1)), axis=1)
            periodic = periodic & (first >= 1)
            token = tf.gather(ids, tf.maximum(step - m + 1, 0), axis=1)
            banned = tf.maximum(banned, tf.one_hot(token, self.vocab_size) * tf.cast(periodic, tf.float32)[:, None])
        return tf.where(banned > 0, NEG_INF, 0.0)

    def wrap(self, score_fn):
        """``score_fn`` with the guard; the state becomes ``(model_state, unused)``."""

        def guarded(ids, step, state):
            model_state, own = state
            log_probs, model_state = score_fn(ids, step, model_state)
            return log_probs + self.mask(ids, step), (model_state, own)

        return guarded


@lru_cache(maxsize=8)
def repetition_guard(vocab_size: int, max_period: int) -> RepetitionGuard:
    """One guard per vocabulary and period: a compiled search is cached per constraint object."""
    return RepetitionGuard(vocab_size, max_period)


def with_guard(settings, vocab_size: int, constraint=None, greedy: bool = False, asked=False):
    """The beam search's constraint: ``constraint``, or the guard ``settings`` (a
    :class:`~keras_transformer.decoding.settings.DecodingSettings`) asks for when there is none.

    A guard that comes with the settings gives way to greedy decoding and to another constraint (a
    parser's); one the caller asked for (``asked``: true, or the overrides of the call, naming it)
    does not: that is a ``ValueError``.
    """
    if not isinstance(asked, bool):
        asked = bool(asked.get("repetition_guard"))
    n = settings.repetition_guard
    if n and asked and (greedy or constraint is not None):
        raise ValueError("repetition_guard needs beam search and no other constraint")
    if not n or greedy or constraint is not None:
        return constraint
    return repetition_guard(vocab_size, n)
