"""The paper's building blocks: attention (3.2), positions (3.5), embeddings (3.4), FFN (3.3)."""

import math

import keras
import numpy as np
import pytest

from keras_transformer import (
    LearnedPositionalEmbedding,
    MultiHeadAttention,
    PositionwiseFeedForward,
    PostNormResidual,
    PreNormResidual,
    ScaledEmbedding,
    SinusoidalPositionalEncoding,
    TransformerDecoderLayer,
    TransformerEncoderLayer,
    scaled_dot_product_attention,
    sinusoidal_encoding,
)


def test_scaled_dot_product_attention_is_equation_1():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(2, 3, 5, 8)).astype("float32") for _ in range(3))
    outputs, weights = scaled_dot_product_attention(q, k, v)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(8)
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(weights), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(outputs), expected @ v, rtol=1e-5, atol=1e-5)


def test_masked_keys_get_zero_weight():
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(1, 2, 4, 8)).astype("float32") for _ in range(3))
    mask = np.array([True, True, False, False])[None, None, None, :]
    _, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    weights = np.asarray(weights)
    assert np.all(weights[..., 2:] == 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)


def test_multi_head_attention_has_separate_key_and_value_sizes():
    layer = MultiHeadAttention(num_heads=8, key_dim=16, value_dim=64)
    x = np.zeros((2, 5, 512), "float32")
    out, weights = layer(x, x, return_attention_scores=True)
    assert out.shape == (2, 5, 512) and weights.shape == (2, 8, 5, 5)
    shapes = sorted(tuple(w.shape) for w in layer.weights if len(w.shape) == 2)
    assert shapes == sorted([(512, 128), (512, 128), (512, 512), (512, 512)])


@pytest.mark.parametrize("d_model", [16, 512])
def test_sinusoidal_encoding_equals_the_formula(d_model):
    positions = np.arange(60)
    pe = np.asarray(sinusoidal_encoding(positions, d_model))
    for pos in (0, 1, 7, 59):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert pe[pos, 2 * i] == pytest.approx(math.sin(angle), abs=2e-5)
            assert pe[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=2e-5)


def test_positional_layers_start_at_the_given_index():
    x = np.zeros((2, 3, 16), "float32")
    full = np.asarray(SinusoidalPositionalEncoding()(np.zeros((2, 8, 16), "float32")))
    shifted = np.asarray(SinusoidalPositionalEncoding()(x, start_index=5))
    np.testing.assert_allclose(shifted, full[:, 5:8], atol=1e-6)
    learned = LearnedPositionalEmbedding(max_length=10)
    table = np.asarray(learned(np.zeros((1, 10, 16), "float32")))[0]
    np.testing.assert_allclose(np.asarray(learned(x, start_index=4))[0], table[4:7])


def test_embedding_is_scaled_by_sqrt_d_model_and_projects_with_the_same_matrix():
    layer = ScaledEmbedding(vocab_size=50, d_model=16)
    ids = np.array([[3, 7, 0]])
    out = np.asarray(layer(ids))
    table = np.asarray(layer.embeddings)
    np.testing.assert_allclose(out[0], table[[3, 7, 0]] * 4.0, rtol=1e-6)
    hidden = np.ones((1, 2, 16), "float32")
    # Sums of 16 products in another order: near-zero sums differ relatively, not absolutely.
    np.testing.assert_allclose(np.asarray(layer.project(hidden)), hidden @ table.T, rtol=1e-5, atol=1e-6)


def test_feed_forward_is_relu_between_two_linear_maps():
    layer = PositionwiseFeedForward(d_ff=32)
    x = np.random.default_rng(2).normal(size=(2, 4, 8)).astype("float32")
    out = np.asarray(layer(x))
    w1, b1 = (np.asarray(w) for w in layer.inner.weights)
    w2, b2 = (np.asarray(w) for w in layer.outer.weights)
    np.testing.assert_allclose(out, np.maximum(0, x @ w1 + b1) @ w2 + b2, rtol=1e-4, atol=1e-5)


def _layer_norm(s):
    return (s - s.mean(-1, keepdims=True)) / np.sqrt(s.var(-1, keepdims=True) + 1e-6)


def test_post_norm_residual_normalises_the_sum():
    layer = PostNormResidual(dropout=0.0)
    x = np.random.default_rng(3).normal(size=(2, 3, 8)).astype("float32")
    y = np.random.default_rng(4).normal(size=(2, 3, 8)).astype("float32")
    np.testing.assert_allclose(np.asarray(layer(x, y)), _layer_norm(x + y), rtol=1e-4, atol=1e-4)
    assert layer.normalize(x) is x  # the sublayer reads x itself


def test_pre_norm_residual_normalises_the_sublayer_input_and_adds_the_raw_residual():
    layer = PreNormResidual(dropout=0.0)
    x = np.random.default_rng(5).normal(size=(2, 3, 8)).astype("float32")
    y = np.random.default_rng(6).normal(size=(2, 3, 8)).astype("float32")
    layer.build(x.shape)
    np.testing.assert_allclose(np.asarray(layer.normalize(x)), _layer_norm(x), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(layer(x, y)), x + y, rtol=1e-6)


def test_pre_norm_layers_compute_the_pre_norm_formula():
    """An encoder layer with norm_first is x + FFN(LN(x + Attn(LN(x)))), not the post-norm stack."""
    x = np.random.default_rng(7).normal(size=(2, 5, 16)).astype("float32")
    pre = TransformerEncoderLayer(num_heads=2, d_ff=32, dropout=0.0, norm_first=True)
    post = TransformerEncoderLayer(num_heads=2, d_ff=32, dropout=0.0)
    pre.build(x.shape)
    post.build(x.shape)
    post.set_weights(pre.get_weights())
    h = pre.self_attention_residual.layer_norm(x)
    x1 = x + np.asarray(pre.self_attention(h, h))
    expected = x1 + np.asarray(pre.feed_forward(pre.feed_forward_residual.layer_norm(x1)))
    np.testing.assert_allclose(np.asarray(pre(x)), expected, rtol=1e-4, atol=1e-4)
    assert not np.allclose(np.asarray(post(x)), expected, atol=1e-2)  # guard: the orders differ


@pytest.mark.parametrize(
    "layer",
    [
        MultiHeadAttention(num_heads=4, key_dim=8, value_dim=16, dropout=0.1),
        TransformerEncoderLayer(num_heads=4, d_ff=64, dropout=0.2),
        TransformerDecoderLayer(num_heads=2, d_ff=64, d_k=4),
        PositionwiseFeedForward(d_ff=64, relu_dropout=0.1),
        ScaledEmbedding(vocab_size=10, d_model=8),
        SinusoidalPositionalEncoding(),
        LearnedPositionalEmbedding(max_length=7),
        PostNormResidual(dropout=0.3),
        PreNormResidual(dropout=0.1, epsilon=1e-5),
        TransformerDecoderLayer(num_heads=2, d_ff=64, norm_first=True),
    ],
    ids=lambda layer: type(layer).__name__,
)
def test_layer_configs_round_trip(layer):
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
    assert keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer)).get_config() == config


def test_bad_layer_arguments_print_the_value():
    with pytest.raises(ValueError, match="num_heads=0"):
        MultiHeadAttention(num_heads=0, key_dim=8)
    with pytest.raises(ValueError, match="d_ff=-3"):
        PositionwiseFeedForward(d_ff=-3)
    with pytest.raises(ValueError, match="max_length"):
        LearnedPositionalEmbedding(max_length=0)
