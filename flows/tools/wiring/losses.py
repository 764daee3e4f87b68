"""What every wiring check shares: a few dozen pairs as padded arrays, and the loss with and
without the source.

A wiring check (``wiring-check parsing``, ``wiring-check translation``) trains a model on a
few dozen training pairs alone, without dropout, and asks two things before an hour is spent on a
new model or recipe: does it learn them back (a model that cannot memorise 50 pairs has a bug,
not a recipe problem), and does it need its source (a decoder that does as well with the source
removed is a language model of the targets)?
"""

from __future__ import annotations

import numpy as np

#: How much worse (nats per target token) the loss must be with the source removed.
SOURCE_MARGIN = 1.0


def arrays(pairs, source_tok, target_tok, eos_id: int, bos_id: int):
    """``(source, target_in, target_out)`` int32 arrays of ``(source, target)`` text pairs, padded with 0."""
    sources = [ids + [eos_id] for ids in source_tok.tokenize([s for s, _ in pairs]).to_list()]
    targets = target_tok.tokenize([t for _, t in pairs]).to_list()
    width_s = max(map(len, sources))
    width_t = max(map(len, targets)) + 1
    source = np.zeros([len(pairs), width_s], np.int32)
    target_in = np.zeros([len(pairs), width_t], np.int32)
    target_out = np.zeros([len(pairs), width_t], np.int32)
    for row, (s, t) in enumerate(zip(sources, targets)):
        source[row, : len(s)] = s
        target_in[row, : len(t) + 1] = [bos_id] + t
        target_out[row, : len(t) + 1] = t + [eos_id]
    return source, target_in, target_out


def mean_nll(model, source, target_in, target_out) -> float:
    """Mean negative log-likelihood per real target token (no label smoothing)."""
    import tensorflow as tf

    logits = model((tf.constant(source), tf.constant(target_in)), training=False)
    nll = tf.keras.losses.sparse_categorical_crossentropy(target_out, logits, from_logits=True).numpy()
    mask = target_out != model.config.pad_id
    return float((nll * mask).sum() / mask.sum())


def source_removed(source, pad_id: int, eos_id: int):
    """The sources with their sentence removed: EOS alone (an all-padding source has nothing to attend to)."""
    zeroed = np.full_like(source, pad_id)
    zeroed[:, 0] = eos_id
    return zeroed


def source_losses(model, source, target_in, target_out) -> dict:
    """The loss with the source and with it removed (EOS alone), in nats per real target token."""
    config = model.config
    return {"nll_with_source": round(mean_nll(model, source, target_in, target_out), 4),
            "nll_source_zeroed": round(mean_nll(model, source_removed(source, config.pad_id, config.eos_id),
                                                target_in, target_out), 4)}


def needs_source(losses: dict) -> bool:
    """The parser's source test: the loss clearly worse without the source. (Translation tests BLEU
    instead: a decoder that memorised its targets needs the source for their first tokens only.)"""
    return losses["nll_source_zeroed"] > losses["nll_with_source"] + SOURCE_MARGIN
