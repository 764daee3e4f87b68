"""Incremental (cached) decoding and greedy search, compiled with ``tf.while_loop``.

Autoregressive generation (section 3, "at each step the model is auto-regressive, consuming the
previously generated symbols as additional input when generating the next") recomputes nothing
it has seen before: each decoder layer's self-attention keys and values are cached, and the
encoder-decoder attention keys and values are projected once per sentence
(``Transformer.init_cache``). A step therefore costs O(t) instead of O(t^2) in the output length.

The search loops here and in :mod:`keras_transformer.decoding.beam` are model independent: they
drive a *score function* ``score_fn(ids, step, state) -> (log_probs, state)`` where

* ``ids`` is the ``[rows, max_length + 1]`` int32 buffer of tokens so far; column 0 holds BOS and
  column ``step`` the newest token (columns after ``step`` are padding),
* ``step`` is the scalar int32 number of tokens generated so far,
* ``state`` is any nest of tensors whose leading dimension is ``rows`` (the decoder self-attention
  cache for a Transformer, anything at all for a synthetic distribution in a test),

and which returns float32 ``log_probs [rows, vocab]`` of the next token and the updated state.
:func:`cached_score_fn` (and, as a baseline, :func:`uncached_score_fn`) adapt a
:class:`~keras_transformer.Transformer` to that interface.

Output length: at most ``source length + max_length_offset`` tokens per sentence, EOS included
(section 6.1: "maximum output length to input length + 50"); the source length counts the
source's non-padding tokens, its EOS included. A hypothesis reaching that length is finished as
it is.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import NamedTuple

import tensorflow as tf

ScoreFn = Callable[[tf.Tensor, tf.Tensor, object], tuple[tf.Tensor, object]]

NEG_INF = float("-inf")


class GreedyOutput(NamedTuple):
    """Result of :func:`greedy_search`.

    ``ids``: ``[batch, max_length]`` generated tokens (BOS not included; EOS included when the
    hypothesis ended with one; ``pad_id`` after the end). ``lengths``: ``[batch]`` number of
    generated tokens, EOS included. ``log_probs``: ``[batch]`` sum of the tokens' log-probabilities.
    ``steps``: scalar number of decoder steps run (the loop stops once every sentence is done).
    """

    ids: tf.Tensor
    lengths: tf.Tensor
    log_probs: tf.Tensor
    steps: tf.Tensor


# ---------------------------------------------------------------------------------- helpers


def source_lengths(source_ids, pad_id: int = 0) -> tf.Tensor:
    """``[batch]`` int32 number of non-padding source tokens (the source's EOS included)."""
    return tf.reduce_sum(tf.cast(tf.not_equal(source_ids, pad_id), tf.int32), axis=-1)


def max_output_lengths(source_ids, max_length_offset, pad_id: int = 0, limit=None) -> tf.Tensor:
    """``[batch]`` int32 maximum output length per sentence: input length + offset (section 6.1).

    ``limit`` caps it, for models that cannot encode more target positions (learned positional
    embeddings of ``max_length`` positions: BOS takes one of them).
    """
    lengths = source_lengths(source_ids, pad_id) + tf.cast(max_length_offset, tf.int32)
    lengths = tf.maximum(lengths, 1)
    if limit is not None:
        lengths = tf.minimum(lengths, tf.cast(limit, tf.int32))
    return lengths


def model_output_limit(model) -> int | None:
    """The most target tokens ``model`` can generate, or ``None`` when unbounded (sinusoids)."""
    limit = model.config.max_positions
    return None if limit is None else limit - 1


def initial_ids(rows, max_length, bos_id: int, pad_id: int = 0) -> tf.Tensor:
    """The ``[rows, max_length + 1]`` token buffer: BOS in column 0, padding elsewhere."""
    ids = tf.fill(tf.stack([rows, max_length + 1]), tf.constant(pad_id, tf.int32))
    column = tf.range(max_length + 1)[None, :]
    return tf.where(column == 0, tf.constant(bos_id, tf.int32), ids)


def write_column(ids, column, tokens) -> tf.Tensor:
    """``ids`` with ``tokens`` (one per row, leading dims of ``ids``) written at ``column``."""
    positions = tf.range(tf.shape(ids)[-1])
    return tf.where(positions == column, tf.cast(tokens, ids.dtype)[..., None], ids)


def forbid_tokens(log_probs, token_ids) -> tf.Tensor:
    """Sets the log-probabilities of ``token_ids`` (PAD, BOS) to -inf: never generated mid-output."""
    if not token_ids:
        return log_probs
    vocab = tf.shape(log_probs)[-1]
    forbidden = tf.reduce_any(
        tf.equal(tf.range(vocab)[:, None], tf.constant(list(token_ids), tf.int32)[None, :]), axis=-1
    )
    return tf.where(forbidden[None, :], tf.constant(NEG_INF, log_probs.dtype), log_probs)


def tile_beams(tensor, beam_size: int) -> tf.Tensor:
    """``[batch, ...]`` -> ``[batch * beam_size, ...]``: each sentence's row repeated per beam.

    Rows of one sentence are adjacent (row ``b * beam_size + i`` is beam ``i`` of sentence ``b``),
    which is the layout the beam search's gathers assume.
    """
    return tf.repeat(tensor, beam_size, axis=0)


def tile_nest(nest, beam_size: int):
    """:func:`tile_beams` applied to every tensor of a nest (e.g. a decoding cache)."""
    return tf.nest.map_structure(lambda t: tile_beams(t, beam_size), nest)


# ---------------------------------------------------------------------- model adapters


def special_ids(model) -> dict[str, int]:
    config = model.config
    return {"pad_id": config.pad_id, "bos_id": config.bos_id, "eos_id": config.eos_id}


#: Cache entries computed once per sentence; the rest (self-attention keys and values, the
#: word alignment's slot count) changes every step and follows the beams.
STATIC_CACHE_KEYS = ("cross", "words")


def cached_score_fn(model, encoder_outputs, encoder_padding_mask, static_cache) -> ScoreFn:
    """A score function running one decoder step of ``model`` on its cache.

    The state is the part of ``init_cache(...)`` that changes every step (``self``, and ``slots``
    for a model with word alignment); ``static_cache`` holds the parts computed once per sentence
    (:data:`STATIC_CACHE_KEYS`). All tensors have one row per hypothesis (tile them with
    :func:`tile_nest` for beam search). PAD and BOS get log-probability -inf.
    """
    forbidden = (model.config.pad_id, model.config.bos_id)

    def score_fn(ids, step, state):
        # The newest token only; every earlier position is represented by the cache.
        tokens = ids[:, step][:, None]
        logits, cache, _ = model.decode(
            tokens,
            encoder_outputs,
            encoder_padding_mask,
            cache={**state, **static_cache},
            cache_index=step,
            training=False,
        )
        log_probs = tf.nn.log_softmax(tf.cast(logits[:, 0, :], tf.float32), axis=-1)
        return forbid_tokens(log_probs, forbidden), {key: cache[key] for key in state}

    return score_fn


def uncached_score_fn(model, encoder_outputs, encoder_padding_mask, word_states=None) -> ScoreFn:
    """The reference without a cache: the whole decoder re-run on the prefix at every step.

    Same outputs as :func:`cached_score_fn` up to float rounding, O(t^2) per sentence instead of
    O(t); kept for tests and the benchmark. The state is unused (an empty tuple).
    """
    forbidden = (model.config.pad_id, model.config.bos_id)

    def score_fn(ids, step, state):
        logits = model.decode(ids[:, : step + 1], encoder_outputs, encoder_padding_mask, training=False,
                              word_states=word_states).logits
        log_probs = tf.nn.log_softmax(tf.cast(logits[:, -1, :], tf.float32), axis=-1)
        return forbid_tokens(log_probs, forbidden), state

    return score_fn


def prepare_decoding(model, source_ids, max_length_offset, beam_size: int = 1, use_cache: bool = True):
    """Encodes ``source_ids`` once and returns ``(score_fn, initial_state, max_lengths)``.

    Encoder outputs, padding mask and the encoder-decoder attention cache are computed per
    sentence and then repeated ``beam_size`` times (rows of a sentence adjacent), so that the
    encoder runs once per sentence, not once per beam.
    """
    source_ids = tf.cast(source_ids, tf.int32)
    pad_id = model.config.pad_id
    max_lengths = max_output_lengths(source_ids, max_length_offset, pad_id, model_output_limit(model))
    encoder_outputs = model.encode(source_ids, training=False)
    padding_mask = model.padding_mask(source_ids)
    if not use_cache:
        word_states = model.word_states(source_ids, encoder_outputs)
        score_fn = uncached_score_fn(
            model, tile_beams(encoder_outputs, beam_size), tile_beams(padding_mask, beam_size),
            None if word_states is None else tile_beams(word_states, beam_size),
        )
        return score_fn, (), max_lengths
    cache = tile_nest(model.init_cache(encoder_outputs, source_ids=source_ids), beam_size)
    static = {key: cache.pop(key) for key in STATIC_CACHE_KEYS if key in cache}
    score_fn = cached_score_fn(
        model,
        tile_beams(encoder_outputs, beam_size),
        tile_beams(padding_mask, beam_size),
        static,
    )
    return score_fn, cache, max_lengths


def loop_shapes(loop_vars):
    """``tf.while_loop`` shape invariants of a search loop whose last variable is the state.

    The state's tensors may change every dimension but the last (the self-attention cache grows
    by one position per step, the constraint's stacks may too); the other variables keep theirs.
    """
    *fixed, state = loop_vars

    def growing(tensor):
        shape = tensor.shape
        return tf.TensorShape([None] * (shape.rank - 1) + [shape[-1]] if shape.rank else [])

    return (*(tensor.shape for tensor in fixed), tf.nest.map_structure(growing, state))


# ---------------------------------------------------------------------- greedy search


def greedy_search(
    score_fn: ScoreFn,
    initial_state,
    max_lengths,
    *,
    bos_id: int,
    eos_id: int,
    pad_id: int = 0,
) -> GreedyOutput:
    """Greedy decoding: the most probable next token at every step, until EOS or the length limit.

    Batched over sentences; one ``tf.while_loop`` runs the steps (no Python loop per token), and
    stops as soon as every sentence has produced EOS or reached its ``max_lengths`` entry.

    Args:
        score_fn: ``(ids, step, state) -> (log_probs, state)``, see the module docstring.
        initial_state: nest of tensors with leading dimension ``batch`` (``()`` for none).
        max_lengths: ``[batch]`` int32 maximum number of generated tokens, EOS included.
    """
    max_lengths = tf.cast(max_lengths, tf.int32)
    batch = tf.shape(max_lengths)[0]
    # At least 1: reduce_max of an empty batch is the lowest int32.
    max_length = tf.maximum(tf.reduce_max(max_lengths), 1)
    ids = initial_ids(batch, max_length, bos_id, pad_id)
    finished = tf.zeros([batch], tf.bool)
    lengths = tf.zeros([batch], tf.int32)
    total = tf.zeros([batch], tf.float32)

    def condition(step, ids, finished, lengths, total, state):
        return tf.logical_and(step < max_length, tf.logical_not(tf.reduce_all(finished)))

    def body(step, ids, finished, lengths, total, state):
        log_probs, state = score_fn(ids, step, state)
        tokens = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
        token_log_probs = tf.gather(log_probs, tokens, batch_dims=1)
        tokens = tf.where(finished, pad_id, tokens)
        ids = write_column(ids, step + 1, tokens)
        total = tf.where(finished, total, total + token_log_probs)
        lengths = tf.where(finished, lengths, step + 1)
        finished = finished | tf.equal(tokens, eos_id) | (step + 1 >= max_lengths)
        return step + 1, ids, finished, lengths, total, state

    loop_vars = (tf.constant(0, tf.int32), ids, finished, lengths, total, initial_state)
    steps, ids, _, lengths, total, _ = tf.while_loop(
        condition, body, loop_vars, shape_invariants=loop_shapes(loop_vars)
    )
    return GreedyOutput(ids=ids[:, 1:], lengths=lengths, log_probs=total, steps=steps)


def greedy_decode(model, source_ids, max_length_offset=50, use_cache: bool = True) -> GreedyOutput:
    """Greedy decoding of ``[batch, source_length]`` padded ``source_ids`` with ``model``.

    ``use_cache=False`` re-runs the full decoder on the prefix at every step (for comparison).
    Wrap in ``tf.function`` (or use :func:`compiled_greedy_decode`) to compile.
    """
    score_fn, state, max_lengths = prepare_decoding(model, source_ids, max_length_offset, 1, use_cache)
    return greedy_search(score_fn, state, max_lengths, **special_ids(model))


# ------------------------------------------------------------------ compiled entry points

# One compiled function per (model, settings): tracing a decoding loop takes seconds, so it is
# done once per model, not once per call. Weak keys let models be garbage collected; the
# functions reach their model through a weak reference too, or they would keep it alive.
_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

SOURCE_SPEC = tf.TensorSpec([None, None], tf.int32, name="source_ids")


def ensure_built(model) -> None:
    """Builds ``model``'s weights eagerly: they must not be created inside a traced function."""
    if not model.built:
        model.build()


def compiled(model, key, factory):
    """``factory()``'s result, built once per ``model`` and ``key`` (a hashable settings tuple)."""
    ensure_built(model)
    per_model = _COMPILED.setdefault(model, {})
    if key not in per_model:
        per_model[key] = factory()
    return per_model[key]


def compiled_greedy_decode(model, use_cache: bool = True):
    """A ``tf.function(source_ids, max_length_offset) -> GreedyOutput`` for ``model``."""

    model_ref = weakref.ref(model)

    def factory():
        # No tensor-dependent Python control flow: AutoGraph has nothing to convert (beam.py).
        @tf.function(input_signature=[SOURCE_SPEC, tf.TensorSpec([], tf.int32)], reduce_retracing=True,
                     autograph=False)
        def decode(source_ids, max_length_offset):
            return greedy_decode(model_ref(), source_ids, max_length_offset, use_cache=use_cache)

        return decode

    return compiled(model, ("greedy", use_cache), factory)
