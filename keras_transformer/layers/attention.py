"""Scaled dot-product attention (section 3.2.1) and multi-head attention (section 3.2.2)."""

from __future__ import annotations

import math

import keras
from keras import ops

# Large enough to zero a softmax entry in float32, small enough not to overflow it.
_MASK_VALUE = -1e9


def scaled_dot_product_attention(
    query,
    key,
    value,
    mask=None,
    dropout_layer=None,
    training=None,
):
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, equation (1).

    Args:
        query: ``[batch, heads, q_len, d_k]``.
        key: ``[batch, heads, k_len, d_k]``.
        value: ``[batch, heads, k_len, d_v]``.
        mask: boolean, broadcastable to ``[batch, heads, q_len, k_len]``; ``True`` where a query
            may attend to a key. Masked logits are set to -1e9 before the softmax ("setting to
            -inf all values in the input of the softmax which correspond to illegal
            connections", section 3.2.3).
        dropout_layer: optional dropout applied to the attention weights.

    Returns:
        ``(outputs [batch, heads, q_len, d_v], weights [batch, heads, q_len, k_len])``.
    """
    d_k = ops.shape(query)[-1]
    scores = ops.einsum("bhqd,bhkd->bhqk", query, key)
    # The softmax runs in float32 even under mixed precision: its exponentials overflow float16.
    scores = ops.cast(scores, "float32") / math.sqrt(d_k)
    if mask is not None:
        # A select, not an added bias: TensorFlow's oneDNN CPU kernels fuse a batch matmul with a
        # following broadcast add into one op that runs 1.3-5.7x slower than this whole training
        # step does with `where` when shapes are static (measured at cpu-small size, 2048-4096
        # tokens per batch; benchmarks/peers/bench_training_vs_kerashub.py).
        scores = ops.where(mask, scores, _MASK_VALUE)
    weights = ops.softmax(scores, axis=-1)
    weights = ops.cast(weights, value.dtype)
    attended = weights
    if dropout_layer is not None:
        attended = dropout_layer(weights, training=training)
    outputs = ops.einsum("bhqk,bhkd->bhqd", attended, value)
    return outputs, weights


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(keras.layers.Layer):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, section 3.2.2.

    Queries and keys are projected to ``key_dim`` (d_k) and values to ``value_dim`` (d_v) per
    head, separately, so the Table 3 row (B) variants (d_k != d_v) are expressible.

    Call arguments:
        query: ``[batch, q_len, d_model]``.
        value: ``[batch, k_len, d_model]``; also the key unless ``key`` is given.
        attention_mask: boolean, broadcastable to ``[batch, heads, q_len, k_len]``.
        query_mask, value_mask, key_mask: boolean ``[batch, length]``, ``True`` at real tokens;
            Keras fills them in from the inputs' Keras masks (``Embedding(mask_zero=True)``), as
            for its own ``MultiHeadAttention``: padded keys get no attention and padded queries
            none of their own. They are combined with ``attention_mask``; the output carries the
            query's mask.
        cache: for incremental decoding, a dict ``{"key": [batch, heads, t, d_k],
            "value": [batch, heads, t, d_v]}``. With ``cache_index`` (= ``t``, the positions
            cached so far) the projections of the new ``value`` positions are appended to the
            cache and the query attends over all of it (decoder self-attention). Without
            ``cache_index`` the cache is a precomputed, read-only projection of the memory
            (encoder-decoder attention, computed once per sentence by ``compute_cache``).
        return_attention_scores: also return the ``[batch, heads, q_len, k_len]`` weights.

    Returns ``outputs``, then the updated cache when ``cache`` and ``cache_index`` were given,
    then the attention weights when requested.
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (("num_heads", num_heads), ("key_dim", key_dim)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"`{name}` must be a positive integer, received {name}={value!r}")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim if value_dim is not None else key_dim
        self.dropout = dropout
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _dense(self, units, name):
        return keras.layers.Dense(
            units,
            use_bias=self.use_bias,
            kernel_initializer=keras.initializers.get(
                keras.initializers.serialize(self.kernel_initializer)
            ),
            dtype=self.dtype_policy,
            name=name,
        )

    def build(self, query_shape, value_shape=None, key_shape=None):
        value_shape = query_shape if value_shape is None else value_shape
        key_shape = value_shape if key_shape is None else key_shape
        self._output_dim = query_shape[-1]
        self.query_dense = self._dense(self.num_heads * self.key_dim, "query")
        self.query_dense.build(query_shape)
        self.key_dense = self._dense(self.num_heads * self.key_dim, "key")
        self.key_dense.build(key_shape)
        self.value_dense = self._dense(self.num_heads * self.value_dim, "value")
        self.value_dense.build(value_shape)
        self.output_dense = self._dense(self._output_dim, "attention_output")
        self.output_dense.build(tuple(query_shape[:-1]) + (self.num_heads * self.value_dim,))
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def _split_heads(self, x, depth):
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (batch, length, self.num_heads, depth))
        return ops.transpose(x, (0, 2, 1, 3))

    def compute_cache(self, value, key=None):
        """Projects a memory once (encoder outputs for encoder-decoder attention)."""
        key = value if key is None else key
        return {
            "key": self._split_heads(self.key_dense(key), self.key_dim),
            "value": self._split_heads(self.value_dense(value), self.value_dim),
        }

    def call(
        self,
        query,
        value,
        key=None,
        attention_mask=None,
        cache=None,
        cache_index=None,
        training=None,
        return_attention_scores=False,
        query_mask=None,
        value_mask=None,
        key_mask=None,
    ):
        attention_mask = self._merge_masks(attention_mask, query_mask, value_mask, key_mask)
        q = self._split_heads(self.query_dense(query), self.key_dim)
        if cache is not None and cache_index is None:
            k, v = cache["key"], cache["value"]
        else:
            k = self._split_heads(self.key_dense(value if key is None else key), self.key_dim)
            v = self._split_heads(self.value_dense(value), self.value_dim)
            if cache is not None:
                # Appended, not written into a buffer of the maximum length: a step then reads,
                # copies and (in beam search) reorders only the positions decoded so far.
                k = ops.concatenate([cache["key"], ops.cast(k, cache["key"].dtype)], axis=2)
                v = ops.concatenate([cache["value"], ops.cast(v, cache["value"].dtype)], axis=2)
                cache = {"key": k, "value": v}
        attended, weights = scaled_dot_product_attention(
            q, k, v, mask=attention_mask, dropout_layer=self.dropout_layer, training=training
        )
        batch, length = ops.shape(attended)[0], ops.shape(attended)[2]
        attended = ops.transpose(attended, (0, 2, 1, 3))
        attended = ops.reshape(attended, (batch, length, self.num_heads * self.value_dim))
        outputs = self.output_dense(attended)
        results = [outputs]
        if cache is not None and cache_index is not None:
            results.append(cache)
        if return_attention_scores:
            results.append(weights)
        return results[0] if len(results) == 1 else tuple(results)

    @staticmethod
    def _merge_masks(attention_mask, query_mask, value_mask, key_mask):
        """``attention_mask`` and the Keras masks as one boolean ``[batch, 1|heads, q_len, k_len]``."""
        merged = None if attention_mask is None else ops.cast(attention_mask, "bool")
        for mask, axis in ((query_mask, -1), (value_mask, -2), (key_mask, -2)):
            if mask is None:
                continue
            mask = ops.expand_dims(ops.expand_dims(ops.cast(mask, "bool"), axis), 1)
            merged = mask if merged is None else ops.logical_and(merged, mask)
        return merged

    def compute_mask(self, query, previous_mask=None):
        # The output is per query position: it carries the query's mask (Keras's MultiHeadAttention).
        return previous_mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


def causal_mask(query_length, key_length, start_index=0):
    """Boolean ``[1, 1, query_length, key_length]``: query ``start_index + i`` sees keys ``<= it``.

    Section 3.2.3: the decoder's self-attention must not see subsequent positions. With
    ``start_index`` > 0 (incremental decoding) the queries are the newest positions.
    """
    query_positions = ops.arange(query_length, dtype="int32") + ops.cast(start_index, "int32")
    key_positions = ops.arange(key_length, dtype="int32")
    return (key_positions[None, :] <= query_positions[:, None])[None, None]
