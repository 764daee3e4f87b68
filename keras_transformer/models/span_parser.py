"""A chart parser on the Transformer encoder: every span scored for every label, and a tagger.

Section 6.3 parses with the whole encoder-decoder, writing the tree as a token sequence. Kitaev &
Klein (2018, "Constituency Parsing with a Self-Attentive Encoder") keep the encoder (section 3.1)
and replace the decoder with a span classifier: a span ``(i, j)`` (words ``i .. j-1``) is read
off the fenceposts around it, ``[f_j - f_i ; b_i+1 - b_j+1]`` of the two halves of each word's
state (with learned start and end sentinels), a small MLP scores it for every label and for "no
constituent" (label 0), and a chart search (``pipelines.tasks.parsing.chart``) picks the best
tree. Trained with cross-entropy on every span independently (the local model of Teng & Zhang
2018), so a step costs one encoder pass and no decoding loop. POS tags come from a classifier
over each word's state. A word's state is that of its first subword piece.

Inputs: ``source_ids`` ``[batch, pieces]`` padded with ``pad_id``. Outputs: ``{"spans": [batch,
n + 1, n + 1, num_labels], "tags": [batch, n, num_tags]}`` float32 logits, ``n`` the batch's
most words; entries past a sentence's words are padding for the caller to ignore.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np
from keras import ops

from keras_transformer.layers.embedding import ScaledEmbedding
from keras_transformer.layers.encoder import TransformerEncoderLayer
from keras_transformer.layers.positional_encoding import SinusoidalPositionalEncoding

IGNORE = -1


@keras.saving.register_keras_serializable(package="keras_transformer")
class SpanParser(keras.Model):
    """Encoder, span classifier and tagger (Kitaev & Klein 2018 on section 3.1's encoder).

    Args:
        source_vocab_size: the subword vocabulary of the words.
        num_labels: span labels, id 0 = no constituent (unary chains are one label).
        num_tags: POS tags.
        word_start_ids: the source pieces that begin a word (SentencePiece's ``▁`` pieces).
        num_layers, d_model, num_heads, d_ff, dropout, norm_first: the encoder (section 3.1, 5.4).
        span_hidden: width of the span MLP's hidden layer.
        pad_id: the source padding id.
        labels, tags: the names of the span labels (``""`` first, chains joined by ``+``) and of
            the tags, for decoding into trees (:class:`~keras_transformer.decoding.chart_parser.ChartParser`);
            their lengths must be ``num_labels`` and ``num_tags``.
        bias: added to every span's constituent log-odds when decoding (chosen on dev).
    """

    def __init__(self, source_vocab_size: int, num_labels: int, num_tags: int, word_start_ids: Sequence[int], *,
                 num_layers: int = 4, d_model: int = 256, num_heads: int = 4, d_ff: int = 1024,
                 dropout: float = 0.2, norm_first: bool = True, span_hidden: int = 256, pad_id: int = 0,
                 labels: Sequence[str] | None = None, tags: Sequence[str] | None = None, bias: float = 0.0,
                 **kwargs):
        super().__init__(**kwargs)
        if d_model % 2:
            raise ValueError(f"SpanParser's `d_model` must be even (fwd/bwd halves), received {d_model=}")
        sizes = {"num_labels": num_labels, "num_tags": num_tags, "source_vocab_size": source_vocab_size}
        for name, value in sizes.items():
            if not isinstance(value, int) or value < 2:
                raise ValueError(f"SpanParser's `{name}` must be an integer >= 2, received {name}={value!r}")
        self.source_vocab_size, self.num_labels, self.num_tags = source_vocab_size, num_labels, num_tags
        for name, names, size in (("labels", labels, num_labels), ("tags", tags, num_tags)):
            if names is not None and len(names) != size:
                raise ValueError(f"SpanParser's `{name}` holds {len(names)} names for {size} classes")
        self.labels = None if labels is None else [str(name) for name in labels]
        self.tags = None if tags is None else [str(name) for name in tags]
        self.bias = float(bias)
        self.word_start_ids = [int(i) for i in word_start_ids]
        if not self.word_start_ids:
            raise ValueError("SpanParser's `word_start_ids` is empty: no source piece begins a word")
        self.num_layers, self.d_model, self.num_heads, self.d_ff = num_layers, d_model, num_heads, d_ff
        self.dropout, self.norm_first, self.span_hidden, self.pad_id = dropout, norm_first, span_hidden, pad_id
        table = np.zeros([source_vocab_size], np.int32)
        table[self.word_start_ids] = 1
        self._word_start_table = table

        self.embedding = ScaledEmbedding(source_vocab_size, d_model, name="source_embedding")
        self.positions = SinusoidalPositionalEncoding(name="encoder_positions")
        self.embedding_dropout = keras.layers.Dropout(dropout)
        self.encoder_layers = [
            TransformerEncoderLayer(num_heads=num_heads, d_ff=d_ff, dropout=dropout, norm_first=norm_first,
                                    name=f"encoder_layer_{i}")
            for i in range(num_layers)
        ]
        self.encoder_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="encoder_norm") if norm_first else None
        half = d_model // 2
        # The span MLP's first layer is linear in the fencepost differences, so it is applied to
        # each fencepost once ([n, h]) and the differences are taken after ([n, n, h]).
        self.forward_projection = keras.layers.Dense(span_hidden, use_bias=False, name="span_forward")
        self.backward_projection = keras.layers.Dense(span_hidden, name="span_backward")
        self.span_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="span_norm")
        self.span_output = keras.layers.Dense(num_labels, name="span_output")
        self.tag_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="tag_norm")
        self.tag_output = keras.layers.Dense(num_tags, name="tag_output")
        self._half = half

    def build(self, input_shape=None):
        hidden = (None, None, self.d_model)
        self.embedding.build(None)
        self.positions.build(hidden)
        for layer in self.encoder_layers:
            layer.build(hidden)
        if self.encoder_norm is not None:
            self.encoder_norm.build(hidden)
        self.sentinels = self.add_weight(name="sentinels", shape=(2, self.d_model),
                                         initializer=keras.initializers.RandomNormal(stddev=0.02))
        self.forward_projection.build((None, None, self._half))
        self.backward_projection.build((None, None, self._half))
        self.span_norm.build((None, None, None, self.span_hidden))
        self.span_output.build((None, None, None, self.span_hidden))
        self.tag_norm.build(hidden)
        self.tag_output.build(hidden)
        self.built = True

    def get_build_config(self):
        return {"built": True}

    def build_from_config(self, config):
        self.build()

    def encode(self, source_ids, training=None):
        """Section 3.1's encoder stack over the pieces: ``[batch, pieces, d_model]``."""
        mask = ops.not_equal(source_ids, self.pad_id)
        x = self.embedding(source_ids)
        x = self.embedding_dropout(x + self.positions(x), training=training)
        for layer in self.encoder_layers:
            x = layer(x, padding_mask=mask, training=training)
        return x if self.encoder_norm is None else self.encoder_norm(x)

    def word_states(self, source_ids, encoder_outputs):
        """``([batch, n, d_model], lengths)``: each word's first-piece state, zero past its sentence."""
        source_ids = ops.cast(source_ids, "int32")
        starts = ops.take(ops.convert_to_tensor(self._word_start_table), source_ids)
        lengths = ops.sum(starts, axis=1)
        n = ops.max(lengths)
        word_of_piece = ops.cumsum(starts, axis=1) - 1
        select = ops.logical_and(ops.equal(word_of_piece[:, None, :], ops.arange(n, dtype="int32")[None, :, None]),
                                 ops.cast(starts, "bool")[:, None, :])
        return ops.matmul(ops.cast(select, encoder_outputs.dtype), encoder_outputs), lengths

    def call(self, source_ids, training=None):
        words, lengths = self.word_states(source_ids, self.encode(source_ids, training=training))
        batch, n = ops.shape(words)[0], ops.shape(words)[1]
        # Fenceposts 0 .. n + 1: the start sentinel, the words, the end sentinel right after each
        # sentence's last word (zeros past it).
        fence = ops.concatenate([ops.broadcast_to(self.sentinels[0], (batch, 1, self.d_model)), words,
                                 ops.zeros((batch, 1, self.d_model), words.dtype)], axis=1)
        end = ops.one_hot(lengths + 1, n + 2, dtype=words.dtype)[:, :, None]
        fence = fence + end * self.sentinels[1]
        forward = self.forward_projection(fence[:, : n + 1, : self._half])   # f_0 .. f_n
        backward = self.backward_projection(fence[:, 1:, self._half:])       # b_1 .. b_n+1
        # [batch, i, j, h]: f_j - f_i + b_i+1 - b_j+1
        spans = (forward[:, None, :, :] - forward[:, :, None, :]) + (backward[:, :, None, :] - backward[:, None, :, :])
        spans = self.span_output(ops.relu(self.span_norm(spans)))
        tags = self.tag_output(self.tag_norm(words))
        return {"spans": ops.cast(spans, "float32"), "tags": ops.cast(tags, "float32")}

    def get_config(self):
        config = super().get_config()
        config.update(source_vocab_size=self.source_vocab_size, num_labels=self.num_labels, num_tags=self.num_tags,
                      word_start_ids=self.word_start_ids, num_layers=self.num_layers, d_model=self.d_model,
                      num_heads=self.num_heads, d_ff=self.d_ff, dropout=self.dropout, norm_first=self.norm_first,
                      span_hidden=self.span_hidden, pad_id=self.pad_id, labels=self.labels, tags=self.tags,
                      bias=self.bias)
        return config


def span_parser_loss(outputs, span_labels, tag_labels):
    """Mean cross-entropy over the real spans plus over the real words (``IGNORE`` elsewhere)."""

    def masked(logits, labels):
        labels = ops.cast(labels, "int32")
        keep = ops.cast(ops.not_equal(labels, IGNORE), "float32")
        losses = keras.losses.sparse_categorical_crossentropy(ops.maximum(labels, 0), logits, from_logits=True)
        return ops.sum(losses * keep) / ops.maximum(ops.sum(keep), 1.0)

    return masked(outputs["spans"], span_labels) + masked(outputs["tags"], tag_labels)
