"""Keras masks through the attention, encoder and decoder layers, as Keras and keras-hub test theirs.

``Embedding(mask_zero=True)`` attaches a mask to its output; a layer that supports masking reads it
(padded keys get no attention) and passes it on (``compute_mask``). The explicit ``padding_mask``
arguments keep working and give the same outputs at real positions.
"""

from __future__ import annotations

import warnings

import keras
import numpy as np
from keras import ops
from keras.src.backend import get_keras_mask, set_keras_mask

from keras_transformer.layers.attention import MultiHeadAttention, causal_mask
from keras_transformer.layers.decoder import TransformerDecoderLayer
from keras_transformer.layers.encoder import TransformerEncoderLayer

# Source: 3, 2 and 4 real tokens, zero-padded; target: 2, 4 and 1.
SOURCE = np.array([[1, 2, 3, 0], [3, 3, 0, 0], [1, 2, 1, 2]])
TARGET = np.array([[5, 4, 0, 0, 0], [3, 1, 1, 2, 0], [1, 0, 0, 0, 0]])
LAYER = dict(num_heads=2, d_ff=16, dropout=0.0)


def _embed(ids, vocab=6, seed=0):
    embedding = keras.layers.Embedding(vocab, 8, mask_zero=True,
                                       embeddings_initializer=keras.initializers.RandomNormal(seed=seed))
    return embedding(ids)


def _padded_key_weights(weights, query_mask, key_mask):
    """The attention weights real queries give padded keys (padded queries' rows are padding)."""
    weights = ops.convert_to_numpy(weights)
    chosen = query_mask[:, None, :, None] & ~key_mask[:, None, None, :]
    return weights[np.broadcast_to(chosen, weights.shape)]


def _no_mask_warning(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    assert not [w for w in caught if "mask" in str(w.message)], [str(w.message) for w in caught]
    return result


def test_attention_reads_the_query_and_value_masks_like_keras():
    """Keras's MultiHeadAttention test_masking: the Keras masks equal the manual attention mask."""
    layer = MultiHeadAttention(num_heads=2, key_dim=2)
    query, value = _embed(TARGET[:, :3]), _embed(SOURCE[:, :3], seed=1)
    output, weights = _no_mask_warning(lambda: layer(query, value, return_attention_scores=True))
    query_mask, value_mask = TARGET[:, :3] != 0, SOURCE[:, :3] != 0
    np.testing.assert_array_equal(ops.convert_to_numpy(get_keras_mask(output)), query_mask)
    manual = (query_mask[:, :, None] & value_mask[:, None, :])[:, None]
    set_keras_mask(query, None)
    set_keras_mask(value, None)
    expected, expected_weights = layer(query, value, attention_mask=manual, return_attention_scores=True)
    np.testing.assert_allclose(ops.convert_to_numpy(output), ops.convert_to_numpy(expected), atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(weights), ops.convert_to_numpy(expected_weights), atol=1e-6)
    padded = _padded_key_weights(weights, query_mask, value_mask)
    assert padded.size and np.all(padded == 0.0)


def test_the_encoder_layer_reads_and_passes_on_the_mask():
    layer = TransformerEncoderLayer(**LAYER, norm_first=True)
    inputs = _embed(SOURCE)
    mask = SOURCE != 0
    outputs, weights = _no_mask_warning(lambda: layer(inputs, return_attention_scores=True))
    np.testing.assert_array_equal(ops.convert_to_numpy(get_keras_mask(outputs)), mask)
    padded = _padded_key_weights(weights, mask, mask)
    assert padded.size and np.all(padded == 0.0)
    # The same as the explicit padding_mask at the real positions.
    plain = ops.convert_to_tensor(ops.convert_to_numpy(inputs))
    explicit = ops.convert_to_numpy(layer(plain, padding_mask=mask))
    np.testing.assert_allclose(ops.convert_to_numpy(outputs)[mask], explicit[mask], atol=1e-5)
    # Without any mask the padded keys do change the real positions: the mask was read.
    unmasked = ops.convert_to_numpy(layer(plain))
    assert not np.allclose(unmasked[mask], explicit[mask], atol=1e-3)


def test_a_functional_model_keeps_the_mask_through_stacked_encoder_layers():
    ids = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(6, 8, mask_zero=True)(ids)
    for norm_first in (False, True):
        x = TransformerEncoderLayer(**LAYER, norm_first=norm_first)(x)
    model = keras.Model(ids, x)
    outputs = _no_mask_warning(lambda: model(SOURCE))
    np.testing.assert_array_equal(ops.convert_to_numpy(get_keras_mask(outputs)), SOURCE != 0)
    # Padding more leaves the real positions unchanged (padded keys get no attention).
    longer = np.pad(SOURCE, ((0, 0), (0, 3)))
    np.testing.assert_allclose(ops.convert_to_numpy(model(longer))[:, :4][SOURCE != 0],
                               ops.convert_to_numpy(outputs)[SOURCE != 0], atol=1e-5)


def test_the_decoder_layer_reads_both_masks_and_passes_on_the_target_s():
    layer = TransformerDecoderLayer(**LAYER)
    target, source = _embed(TARGET), _embed(SOURCE, seed=1)
    target_mask, source_mask = TARGET != 0, SOURCE != 0
    length = TARGET.shape[1]
    causal = ops.convert_to_numpy(causal_mask(length, length))
    outputs, weights = _no_mask_warning(
        lambda: layer(target, source, self_attention_mask=causal, return_attention_scores=True))
    np.testing.assert_array_equal(ops.convert_to_numpy(get_keras_mask(outputs)), target_mask)
    for padded in (_padded_key_weights(weights["cross"], target_mask, source_mask),
                   _padded_key_weights(weights["self"], target_mask, target_mask)):
        assert padded.size and np.all(padded == 0.0)
    # The explicit masks give the same outputs at the real target positions.
    plain_target = ops.convert_to_tensor(ops.convert_to_numpy(target))
    plain_source = ops.convert_to_tensor(ops.convert_to_numpy(source))
    explicit = layer(plain_target, plain_source, self_attention_mask=causal & target_mask[:, None, None, :],
                     encoder_padding_mask=source_mask)
    np.testing.assert_allclose(ops.convert_to_numpy(outputs)[target_mask],
                               ops.convert_to_numpy(explicit)[target_mask], atol=1e-5)


def test_an_explicit_padding_mask_and_the_keras_mask_both_apply():
    layer = TransformerEncoderLayer(**LAYER)
    inputs = _embed(SOURCE)
    explicit = SOURCE != 0
    explicit[2, 3] = False   # a real token the Keras mask keeps, hidden by the explicit mask
    both = ops.convert_to_numpy(layer(inputs, padding_mask=explicit))
    plain = ops.convert_to_tensor(ops.convert_to_numpy(inputs))
    np.testing.assert_allclose(both[explicit], ops.convert_to_numpy(layer(plain, padding_mask=explicit))[explicit],
                               atol=1e-5)
