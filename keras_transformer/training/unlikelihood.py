"""Token-level unlikelihood against repeating the target's own earlier tokens (not in the paper).

Welleck et al. (2019), "Neural Text Generation with Unlikelihood Training", section 5.1: at each
target position t, every distinct token of the reference prefix y_<t other than y_t is a negative
candidate c, and the loss adds ``-log(1 - p(c | y_<t, x))``. Cross-entropy (section 5.4) pushes
every wrong token down alike; this pushes hardest on the ones a looping decoder would pick again
("Kunst-Kunst-Kunst", "überprüfen, überprüfen, ..."). A token the reference does repeat is the
gold token at its position, never a candidate there, so legitimate repeats are not penalised.

Every earlier token also pushes down the function words a sentence needs again ("die", "der", ","),
which cost BLEU (``cpu-small-r4-unlikelihood-2026-11-27.json``). A decoder's loops are local: the
same piece or few pieces again at once ("die die die"). :func:`recent_token_candidates` takes only
the last ``window`` tokens as candidates.
"""

from __future__ import annotations

import tensorflow as tf


def previous_token_candidates(target_out: tf.Tensor, pad_id: int = 0) -> tuple[tf.Tensor, tf.Tensor]:
    """The negative candidates of each target position, as ids and a mask over the prefix.

    Args:
        target_out: int ``[batch, length]`` reference ids, ``pad_id`` where there is no token.

    Returns:
        ``(ids [batch, length, length], mask [batch, length, length] bool)``: at ``[b, t, s]`` the
        id ``target_out[b, s]``, and whether it is a candidate at position ``t``: ``s < t``, not
        padding, the first occurrence of its id in the sentence, and not the gold ``target_out[b, t]``.
    """
    y = tf.convert_to_tensor(target_out)
    length = tf.shape(y)[1]
    same = tf.equal(y[:, :, None], y[:, None, :])  # [b, t, s]: y_t == y_s
    ones = tf.ones([length, length], tf.bool)
    earlier = tf.linalg.band_part(ones, -1, 0) & tf.logical_not(tf.eye(length, dtype=tf.bool))  # s < t
    first = tf.logical_not(tf.reduce_any(same & earlier[None], axis=2))  # [b, s]: no earlier y_s
    mask = earlier[None] & first[:, None, :] & tf.not_equal(y, pad_id)[:, None, :] & tf.logical_not(same)
    ids = tf.broadcast_to(y[:, None, :], tf.shape(same))
    return ids, mask


def recent_token_candidates(target_out: tf.Tensor, window: int, pad_id: int = 0) -> tuple[tf.Tensor, tf.Tensor]:
    """Like :func:`previous_token_candidates`, over the ``window`` tokens just before each position.

    Returns ``(ids [batch, length, window], mask [batch, length, window] bool)``: at ``[b, t, k]`` the
    id ``target_out[b, t - 1 - k]``, a candidate unless ``t - 1 - k < 0``, it is padding, the gold
    ``target_out[b, t]`` or the same id as a nearer one (``k' < k``).
    """
    y = tf.convert_to_tensor(target_out)
    # Row k holds y shifted right by k + 1, padding where it runs off the start.
    shifted = [tf.pad(y, [[0, 0], [k + 1, 0]], constant_values=pad_id)[:, :-(k + 1)] for k in range(window)]
    ids = tf.stack(shifted, axis=2)  # [b, t, k]
    mask = tf.not_equal(ids, pad_id) & tf.not_equal(ids, y[:, :, None])
    nearer = [tf.zeros_like(shifted[0], tf.bool)]
    for k in range(1, window):
        nearer.append(tf.reduce_any(tf.equal(ids[:, :, k:k + 1], ids[:, :, :k]), axis=2))
    return ids, mask & tf.logical_not(tf.stack(nearer, axis=2))


def unlikelihood_sum(logits: tf.Tensor, candidate_ids: tf.Tensor, candidate_mask: tf.Tensor) -> tf.Tensor:
    """Sum over positions and candidates of ``-log(1 - p(candidate))``.

    Args:
        logits: ``[positions, vocab]`` (e.g. the real target positions only).
        candidate_ids: int ``[positions, candidates]``; candidate_mask: bool, same shape.
    """
    logits = tf.cast(logits, tf.float32)
    log_p = tf.gather(logits, candidate_ids, batch_dims=1) - tf.reduce_logsumexp(logits, axis=-1, keepdims=True)
    # log(1 - p) stays finite as p -> 1: a candidate the model is certain of costs -log(1e-6), not inf.
    log_not_p = tf.math.log1p(-tf.minimum(tf.exp(log_p), 1.0 - 1e-6))
    return -tf.reduce_sum(tf.where(candidate_mask, log_not_p, 0.0))
