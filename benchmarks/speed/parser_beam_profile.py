"""Where the constrained beam search spends its time: the model, the bracket constraint, the beam.

Section 6.3 decodes with a beam of 21. One decoding step of the search is three pieces of work:
the decoder step of every hypothesis (``batch * beam`` rows through the cached decoder), the
bracket constraint's mask and state update (:mod:`keras_transformer.decoding.constraints`), and the
beam's bookkeeping (top-k over ``beam * vocab`` candidates, the finished set, gathering the
cache). On one batch, three compiled programs are timed after a warm-up call:

* ``full``: the search the evaluation runs (constraint on);
* ``unconstrained``: the same search without the constraint;
* ``model``: only the decoder steps, as many as the full search took, on the same rows.

Per decoding step, ``constraint = full - unconstrained`` and ``beam = unconstrained - model``
(per-step times, because the unconstrained search may stop after another number of steps).
"""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf

from keras_transformer.decoding.beam import beam_search, beam_search_decode
from keras_transformer.decoding.greedy import loop_shapes, prepare_decoding, special_ids


def _timed(function, *args, repeats: int = 2):
    """Seconds of the fastest of ``repeats`` calls after one warm-up call (tracing excluded)."""
    result = function(*args)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        result = function(*args)
        best = min(best, time.perf_counter() - started)
    return best, result


def profile_batch(model, source_ids: np.ndarray, slots: np.ndarray, constraint, beam_size: int,
                  alpha: float, max_length_offset: int) -> dict:
    """Milliseconds per decoding step of the model, the constraint and the beam, on one batch."""
    source = tf.constant(source_ids, tf.int32)
    slot_counts = tf.constant(slots, tf.int32)

    @tf.function
    def full(source, slots):
        return beam_search_decode(model, source, beam_size, alpha, max_length_offset, constraint, slots).steps

    @tf.function
    def unconstrained(source):
        # The search itself, not beam_search_decode: that switches a beam of one to greedy decoding.
        score_fn, state, max_lengths = prepare_decoding(model, source, max_length_offset, beam_size)
        return beam_search(score_fn, state, max_lengths, beam_size=beam_size, alpha=alpha,
                           **special_ids(model)).steps

    @tf.function
    def model_only(source, steps):
        score_fn, state, _ = prepare_decoding(model, source, max_length_offset, beam_size)
        rows = tf.shape(source)[0] * beam_size
        ids = tf.fill(tf.stack([rows, steps + 1]), model.config.bos_id)

        def body(step, total, state):
            log_probs, state = score_fn(ids, step, state)
            return step + 1, total + tf.reduce_sum(log_probs[:, 0]), state

        loop_vars = (tf.constant(0), tf.constant(0.0), state)
        _, total, _ = tf.while_loop(lambda step, *_: step < steps, body, loop_vars,
                                    shape_invariants=loop_shapes(loop_vars))
        return total

    full_seconds, full_steps = _timed(full, source, slot_counts)
    free_seconds, free_steps = _timed(unconstrained, source)
    model_seconds, _ = _timed(model_only, source, full_steps)
    full_steps, free_steps = int(full_steps), int(free_steps)
    per_step = {"full": 1000 * full_seconds / full_steps, "unconstrained": 1000 * free_seconds / free_steps,
                "model": 1000 * model_seconds / full_steps}
    return {
        "beam_size": beam_size, "sentences": int(source_ids.shape[0]), "steps": full_steps,
        "unconstrained_steps": free_steps, "seconds": round(full_seconds, 3),
        "ms_per_step": {
            "model": round(per_step["model"], 2),
            "constraint": round(per_step["full"] - per_step["unconstrained"], 2),
            "beam": round(per_step["unconstrained"] - per_step["model"], 2),
            "total": round(per_step["full"], 2),
        },
    }
