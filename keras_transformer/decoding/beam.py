"""Beam search as the paper ran it (section 6.1), batched and compiled with ``tf.while_loop``.

"We used beam search with a beam size of 4 and length penalty alpha = 0.6 [GNMT] ... We set the
maximum output length during inference to input length + 50, but terminate early when
possible." The algorithm follows tensor2tensor's beam search, which produced the paper's numbers:

* Hypotheses are ranked by the GNMT length-normalised score ``log P(Y|X) / lp(Y)`` with
  ``lp(Y) = ((5 + |Y|) / 6) ** alpha`` (Wu et al. 2016, eq. 14; |Y| counts EOS).
* Two sets per sentence: ``beam_size`` *live* hypotheses that are still growing, ranked by their
  log-probability, and up to ``beam_size`` *finished* ones (ended with EOS or at the maximum
  length), ranked by their normalised score. A finished hypothesis leaves the live set and is
  only ever replaced by a better *finished* one, never dropped for a live hypothesis.
* Each step scores every live hypothesis' extensions and keeps the top ``2 * beam_size``
  candidates: at most ``beam_size`` of them end in EOS (one per live hypothesis), so at least
  ``beam_size`` live ones always remain.
* A candidate ending in EOS becomes finished only if it ranks among the top ``beam_size``
  candidates, i.e. if it would have held a place in the beam (as in fairseq). This makes
  ``beam_size=1`` with ``alpha=0`` exactly greedy decoding; tensor2tensor admits EOS from all
  ``2 * beam_size`` candidates, which differs only when a low-ranked EOS later wins.
* Early termination: a sentence is done when no live hypothesis can still beat its best finished
  one. Log-probabilities only fall as a hypothesis grows and, for ``alpha >= 0``, the penalty is
  largest at the maximum length, so ``live log-prob / lp(max length)`` bounds every score a live
  hypothesis can reach (tensor2tensor's ``stop_early`` bound). The loop ends when every sentence
  is done or at the longest maximum length.

The core is independent of any model: it drives a score function
``score_fn(ids, step, state) -> (log_probs, state)`` (see :mod:`keras_transformer.decoding.greedy`), so a
test can plug in a distribution it controls. :func:`beam_search_decode` adapts a
``Transformer``: it encodes once per sentence, repeats encoder outputs and caches per beam, and
the core reorders the self-attention cache by the surviving beams' origins at every step.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import tensorflow as tf

from keras_transformer.decoding.greedy import (
    NEG_INF,
    SOURCE_SPEC,
    GreedyOutput,
    ScoreFn,
    compiled,
    greedy_decode,
    initial_ids,
    loop_shapes,
    prepare_decoding,
    special_ids,
    write_column,
)


class BeamSearchOutput(NamedTuple):
    """Finished hypotheses per sentence, best first.

    ``ids``: ``[batch, beam, max_length]`` tokens (BOS not included, EOS included when the
    hypothesis ended with one, ``pad_id`` after its end). ``scores``: ``[batch, beam]``
    length-normalised scores (-inf for empty slots). ``log_probs``: ``[batch, beam]``
    ``log P(Y|X)``. ``lengths``: ``[batch, beam]`` number of tokens, EOS included. ``steps``:
    scalar number of decoder steps run (smaller than the maximum length when every sentence
    terminated early).

    Entry ``[:, 0]`` is the search's answer. The other entries are the best finished hypotheses
    met before the search stopped, not guaranteed to be the overall runners-up.
    """

    ids: tf.Tensor
    scores: tf.Tensor
    log_probs: tf.Tensor
    lengths: tf.Tensor
    steps: tf.Tensor


def length_penalty(length, alpha) -> tf.Tensor:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al. 2016, eq. 14)."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, tf.cast(alpha, tf.float32))


def _gather_beams(tensor, indices):
    """``tensor[b, indices[b, j], ...]`` for ``tensor [batch, n, ...]`` and ``indices [batch, m]``."""
    return tf.gather(tensor, indices, batch_dims=1)


def beam_search(
    score_fn: ScoreFn,
    initial_state,
    max_lengths,
    *,
    beam_size: int,
    alpha,
    bos_id: int,
    eos_id: int,
    pad_id: int = 0,
    min_lengths=None,
) -> BeamSearchOutput:
    """Batched beam search with a finished set, GNMT length penalty and early termination.

    Args:
        score_fn: ``(ids [batch * beam, max_length + 1], step, state) -> (log_probs [batch * beam,
            vocab], state)``. Rows ``b * beam_size ... b * beam_size + beam_size - 1`` are sentence
            ``b``'s live hypotheses; ``ids[:, step]`` is their newest token.
        initial_state: nest of tensors with leading dimension ``batch * beam_size`` (each
            sentence's state repeated per beam, e.g. with ``decoding.tile_nest``); ``()`` for
            none. Every step it is reordered to follow the surviving hypotheses.
        max_lengths: ``[batch]`` int32 maximum output length per sentence, EOS included.
        beam_size: number of live (and of kept finished) hypotheses per sentence.
        alpha: length penalty exponent, >= 0 (0 ranks by log-probability alone).
        min_lengths: optional ``[batch]`` int32 length floor: no hypothesis of sentence ``b``
            ends (in EOS) before it holds ``min_lengths[b]`` tokens (not in the paper; see
            :func:`length_floor`). The maximum length still ends it.

    Returns:
        :class:`BeamSearchOutput`, best hypothesis first per sentence.
    """
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive integer, got {beam_size!r}")
    if isinstance(alpha, (int, float)) and alpha < 0:
        # The early-termination bound assumes the penalty grows with length.
        raise ValueError(f"length penalty alpha must be >= 0, got {alpha}")
    k = beam_size
    alpha = tf.cast(alpha, tf.float32)
    tf.debugging.assert_non_negative(alpha, message="length penalty alpha must be >= 0")
    max_lengths = tf.cast(max_lengths, tf.int32)
    batch = tf.shape(max_lengths)[0]
    # At least 1: reduce_max of an empty batch is the lowest int32.
    max_length = tf.maximum(tf.reduce_max(max_lengths), 1)
    width = max_length + 1

    alive_ids = tf.reshape(initial_ids(batch * k, max_length, bos_id, pad_id), tf.stack([batch, k, width]))
    # Only beam 0 starts live; the others at -inf so that step 1 does not expand k copies of BOS.
    alive_log_probs = tf.tile(
        tf.constant([[0.0] + [NEG_INF] * (k - 1)], tf.float32), tf.stack([batch, 1])
    )
    finished_ids = alive_ids
    finished_scores = tf.fill(tf.stack([batch, k]), NEG_INF)
    finished_log_probs = tf.fill(tf.stack([batch, k]), NEG_INF)
    finished_lengths = tf.zeros(tf.stack([batch, k]), tf.int32)
    done = tf.zeros([batch], tf.bool)
    # Best score any live hypothesis of sentence b can still reach is log-prob / lp(max_lengths[b]).
    max_penalty = length_penalty(max_lengths, alpha)
    rank = tf.range(2 * k)[None, :]
    # Floors per row of the flattened [batch * k] hypotheses; a floor only removes candidates,
    # so the early-termination bound below still holds.
    floors = None if min_lengths is None else tf.repeat(tf.cast(min_lengths, tf.int32), k)

    def condition(step, alive_ids, alive_log_probs, f_ids, f_scores, f_log_probs, f_lengths, done, state):
        return tf.logical_and(step < max_length, tf.logical_not(tf.reduce_all(done)))

    def body(step, alive_ids, alive_log_probs, f_ids, f_scores, f_log_probs, f_lengths, done, state):
        log_probs, new_state = score_fn(tf.reshape(alive_ids, tf.stack([batch * k, width])), step, state)
        vocab = tf.shape(log_probs)[-1]
        if floors is not None:
            # ``step`` tokens are written: EOS now would end the hypothesis below its floor.
            early_eos = (step < floors)[:, None] & tf.equal(tf.range(vocab), eos_id)[None, :]
            log_probs = tf.where(early_eos, tf.cast(NEG_INF, log_probs.dtype), log_probs)
        log_probs = tf.reshape(tf.cast(log_probs, tf.float32), tf.stack([batch, k * vocab]))
        # Extend every live hypothesis by every token; keep the 2k best by log-probability.
        candidate_scores = tf.reshape(
            alive_log_probs[:, :, None] + tf.reshape(log_probs, tf.stack([batch, k, vocab])),
            tf.stack([batch, k * vocab]),
        )
        cand_log_probs, cand_index = tf.math.top_k(candidate_scores, k=2 * k)
        cand_beam = cand_index // vocab
        cand_token = cand_index % vocab
        length = step + 1
        cand_ids = write_column(_gather_beams(alive_ids, cand_beam), length, cand_token)

        # Finished candidates: EOS within the top k, or every top-k candidate once the sentence
        # reaches its maximum length (finished as it is, without EOS).
        is_eos = tf.equal(cand_token, eos_id)
        at_max = length >= max_lengths
        finishing = (is_eos | at_max[:, None]) & (rank < k) & (cand_log_probs > NEG_INF)
        cand_norm = cand_log_probs / length_penalty(length, alpha)
        # Previous finished first: top_k keeps the lower index on ties, so an equal newcomer
        # never displaces a hypothesis already finished.
        merged_scores = tf.concat([f_scores, tf.where(finishing, cand_norm, NEG_INF)], axis=1)
        new_f_scores, keep = tf.math.top_k(merged_scores, k=k)
        new_f_ids = _gather_beams(tf.concat([f_ids, cand_ids], axis=1), keep)
        new_f_log_probs = _gather_beams(tf.concat([f_log_probs, cand_log_probs], axis=1), keep)
        cand_lengths = tf.fill(tf.shape(cand_token), length)
        new_f_lengths = _gather_beams(tf.concat([f_lengths, cand_lengths], axis=1), keep)

        # Live set: the k best candidates that did not end in EOS.
        live_scores = tf.where(is_eos, NEG_INF, cand_log_probs)
        new_alive_log_probs, live = tf.math.top_k(live_scores, k=k)
        new_alive_ids = _gather_beams(cand_ids, live)
        origin = _gather_beams(cand_beam, live)
        rows = tf.reshape(tf.range(batch)[:, None] * k + origin, [-1])
        new_state = tf.nest.map_structure(lambda s: tf.gather(s, rows, axis=0), new_state)

        # Sentences already done keep their results (their rows are still computed: batched).
        def freeze(old, new):
            mask = tf.reshape(done, tf.concat([[batch], tf.ones([tf.rank(new) - 1], tf.int32)], 0))
            return tf.where(mask, old, new)

        new_f_ids, new_f_scores, new_f_log_probs, new_f_lengths = (
            freeze(f_ids, new_f_ids),
            freeze(f_scores, new_f_scores),
            freeze(f_log_probs, new_f_log_probs),
            freeze(f_lengths, new_f_lengths),
        )
        live_bound = new_alive_log_probs[:, 0] / max_penalty
        new_done = done | at_max | (new_f_scores[:, 0] >= live_bound)
        return (
            step + 1,
            new_alive_ids,
            new_alive_log_probs,
            new_f_ids,
            new_f_scores,
            new_f_log_probs,
            new_f_lengths,
            new_done,
            new_state,
        )

    loop_vars = (tf.constant(0, tf.int32), alive_ids, alive_log_probs, finished_ids, finished_scores,
                 finished_log_probs, finished_lengths, done, initial_state)
    steps, _, _, f_ids, f_scores, f_log_probs, f_lengths, _, _ = tf.while_loop(
        condition, body, loop_vars, shape_invariants=loop_shapes(loop_vars)
    )
    return BeamSearchOutput(
        ids=f_ids[:, :, 1:], scores=f_scores, log_probs=f_log_probs, lengths=f_lengths, steps=steps
    )


def length_floor(model, source_ids, min_length_ratio: float) -> tf.Tensor:
    """``[batch]`` int32: ``min_length_ratio`` times each source's length in pieces (EOS not counted),
    rounded down. A floor against stopping early (not in the paper): a model trained for an hour
    sometimes ends a long sentence halfway, and short output costs BLEU its brevity penalty."""
    pieces = tf.reduce_sum(tf.cast(tf.not_equal(source_ids, model.config.pad_id), tf.float32), axis=1) - 1.0
    return tf.cast(tf.floor(float(min_length_ratio) * tf.maximum(pieces, 0.0)), tf.int32)


def beam_search_decode(
    model, source_ids, beam_size: int = 4, alpha=0.6, max_length_offset=50, constraint=None, slots=None,
    min_length_ratio: float = 0.0,
) -> BeamSearchOutput:
    """Beam search with a :class:`~keras_transformer.Transformer` and its incremental cache.

    The encoder runs once per sentence; encoder outputs, padding mask and encoder-decoder
    keys/values are repeated per beam; the self-attention cache follows the surviving beams.
    Wrap in ``tf.function`` (or use :func:`compiled_beam_search`) to compile.

    ``beam_size=1`` is greedy decoding, as in tensor2tensor's Transformer (``_fast_decode``
    switches to greedy for a beam of one): a beam of one kept alive past an EOS could otherwise
    return a longer output than greedy under a length penalty ``alpha > 0``.

    ``constraint`` (e.g. a :class:`~keras_transformer.decoding.constraints.BracketConstraint`) masks the
    tokens that would make a hypothesis invalid; ``slots`` (``[batch]`` int) is its per-sentence
    input. A constrained search runs the beam even for ``beam_size=1``, as does a length floor
    (``min_length_ratio`` > 0, a Python number: no EOS before that fraction of the source's pieces).
    """
    if beam_size == 1 and constraint is None and not min_length_ratio:
        return _greedy_as_beam(greedy_decode(model, source_ids, max_length_offset), alpha)
    score_fn, state, max_lengths = prepare_decoding(model, source_ids, max_length_offset, beam_size)
    if constraint is not None:
        score_fn = constraint.wrap(score_fn)
        state = (state, constraint.initial_state(tf.repeat(tf.cast(slots, tf.int32), beam_size)))
    floors = length_floor(model, source_ids, min_length_ratio) if min_length_ratio else None
    return beam_search(
        score_fn, state, max_lengths, beam_size=beam_size, alpha=alpha, min_lengths=floors, **special_ids(model)
    )


def _greedy_as_beam(greedy: GreedyOutput, alpha) -> BeamSearchOutput:
    """A greedy result in the beam-search layout: one hypothesis per sentence."""
    return BeamSearchOutput(
        ids=greedy.ids[:, None, :],
        scores=(greedy.log_probs / length_penalty(greedy.lengths, alpha))[:, None],
        log_probs=greedy.log_probs[:, None],
        lengths=greedy.lengths[:, None],
        steps=greedy.steps,
    )


def compiled_beam_search(model, beam_size: int, constraint=None, min_length_ratio: float = 0.0):
    """A ``tf.function(source_ids, alpha, max_length_offset) -> BeamSearchOutput`` for ``model``.

    Traced once per model, beam size and length floor; ``alpha`` and the offset
    are tensors, so changing them does not retrace. With a ``constraint`` the function takes
    ``slots`` (``[batch]`` int32) too.
    """
    min_length_ratio = float(min_length_ratio)
    if min_length_ratio < 0:
        raise ValueError(f"min_length_ratio must be >= 0, got {min_length_ratio}")

    model_ref = weakref.ref(model)  # see decoding.compiled: the cache must not keep models alive
    signature = [
        SOURCE_SPEC,
        tf.TensorSpec([], tf.float32, name="alpha"),
        tf.TensorSpec([], tf.int32, name="max_length_offset"),
    ]
    if constraint is not None:
        signature.append(tf.TensorSpec([None], tf.int32, name="slots"))

    def factory():
        # The loop is tf.while_loop and no Python branch reads a tensor: AutoGraph has nothing to
        # convert, and converting the model's call tree cost a fresh process 3.4 s of its first trace.
        @tf.function(input_signature=signature, reduce_retracing=True, autograph=False)
        def decode(source_ids, alpha, max_length_offset, *slots):
            return beam_search_decode(model_ref(), source_ids, beam_size, alpha, max_length_offset,
                                      constraint, *slots, min_length_ratio=min_length_ratio)

        return decode

    key = ("beam", beam_size) if constraint is None else ("constrained-beam", beam_size, id(constraint))
    key += (min_length_ratio,) if min_length_ratio else ()
    return compiled(model, key, factory)


def compiled_search(model, settings, constraint=None):
    """:func:`compiled_beam_search` for a :class:`~keras_transformer.decoding.settings.DecodingSettings`:
    traced for its beam size and length floor (call it with its length penalty and offset)."""
    return compiled_beam_search(model, settings.beam_size, constraint, settings.min_length_ratio)


def search_decode(model, source_ids, settings, constraint=None, slots=None) -> BeamSearchOutput:
    """:func:`beam_search_decode` with every setting of a
    :class:`~keras_transformer.decoding.settings.DecodingSettings` (inside a traced function: the export)."""
    return beam_search_decode(model, source_ids, settings.beam_size, settings.length_penalty,
                              settings.max_length_offset, constraint, slots,
                              min_length_ratio=settings.min_length_ratio)
