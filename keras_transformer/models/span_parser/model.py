"""A chart parser on the Transformer encoder: every span scored for every label, and a tagger.

Section 6.3 parses with the whole encoder-decoder, writing the tree as a token sequence. Kitaev &
Klein (2018, "Constituency Parsing with a Self-Attentive Encoder") keep the encoder (section 3.1)
and replace the decoder with a span classifier: a span ``(i, j)`` (words ``i .. j-1``) is read
off the fenceposts around it, ``[f_j - f_i ; b_i+1 - b_j+1]`` of the two halves of each word's
state (with learned start and end sentinels), a small MLP scores it for every label and for "no
constituent" (label 0), and a chart search (``pipelines.tasks.parsing.chart``) picks the best
tree. Trained on the gold tree's probability among all trees (the tree CRF of Zhang, Zhou & Li
2020, ``keras_transformer.models.span_parser.tree_crf``), a step costs one encoder pass and no decoding loop;
the chart search adds up the log-odds of each span's probability of being in the tree under the
tree CRF (minimum Bayes risk decoding). POS tags come from a classifier
over each word's state. A word's state is that of its first subword piece, or the mean of its
pieces' (``word_pieces``). With ``char_dim``, each word's spelling (a character CNN,
``keras_transformer.layers.word_characters``; K&K's section 5.1) is added to its pieces' embeddings;
with ``spell_dropped``, piece dropout hides a piece's embedding but not its characters.
Optionally the spans are read as supar's parser reads them: from bidirectional LSTMs over the word
states (``word_lstm``).

Inputs: ``source_ids`` ``[batch, pieces]`` padded with ``pad_id``. Outputs: ``{"spans": [batch,
n + 1, n + 1, num_labels], "tags": [batch, n, num_tags]}`` float32 logits, ``n`` the batch's
most words; entries past a sentence's words are padding for the caller to ignore.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import keras
import numpy as np
from keras import ops

from keras_transformer.layers.embedding import ScaledEmbedding
from keras_transformer.layers.encoder import TransformerEncoderLayer
from keras_transformer.layers.positional_encoding import SinusoidalPositionalEncoding
from keras_transformer.layers.word_characters import WordCharacters, word_membership
from keras_transformer.models.config import SpanParserConfig
from keras_transformer.models.span_parser.targets import IGNORE


@keras.saving.register_keras_serializable(package="keras_transformer")
class SpanParser(keras.Model):
    """Encoder, span classifier and tagger (Kitaev & Klein 2018 on section 3.1's encoder).

    Args: the fields of :class:`~keras_transformer.models.config.SpanParserConfig` (kept as
    ``model.config``): the source vocabulary, the span ``labels`` (``""`` = no constituent first,
    unary chains one label) and the POS ``tags``, whose names decode scores into trees
    (:class:`~keras_transformer.models.span_parser.chart_parser.ChartParser`), the source pieces that begin a
    word (SentencePiece's ``▁`` pieces), the encoder (sections 3.1 and 5.4), the span MLP's width,
    the special ids and the dev-chosen constituent ``bias``.
    """

    def __init__(self, source_vocab_size: int | None = None, labels: Sequence[str] = (), tags: Sequence[str] = (),
                 word_start_ids: Sequence[int] = (), **settings):
        names = SpanParserConfig.field_names()
        settings = SpanParserConfig.saved_settings(settings)
        gone = SpanParserConfig.removed_setting(settings)
        if gone is not None:
            raise ValueError(f"Invalid span parser setting `{gone[0]}`={settings[gone[0]]!r}: was removed ({gone[1]})")
        kwargs = {k: settings.pop(k) for k in list(settings) if k not in names}
        super().__init__(**kwargs)
        self.config = SpanParserConfig(source_vocab_size=source_vocab_size, labels=labels, tags=tags,
                                       word_start_ids=word_start_ids, **settings)
        c = self.config
        if len(c.labels) < 2 or len(c.tags) < 2:
            raise ValueError(f"SpanParser needs its span `labels` and POS `tags` (received {len(c.labels)} labels "
                             f"and {len(c.tags)} tags): the training stage reads them off the treebank")
        if not c.word_start_ids:
            raise ValueError("SpanParser's `word_start_ids` is empty: no source piece begins a word")
        self.source_vocab_size, self.num_labels, self.num_tags = c.source_vocab_size, len(c.labels), len(c.tags)
        self.labels, self.tags, self.word_start_ids = list(c.labels), list(c.tags), list(c.word_start_ids)
        self.num_layers, self.d_model, self.num_heads, self.d_ff = c.num_layers, c.d_model, c.num_heads, c.d_ff
        self.dropout, self.norm_first, self.span_hidden, self.pad_id = c.dropout, c.norm_first, c.span_hidden, c.pad_id
        table = np.zeros([c.source_vocab_size], np.int32)
        table[self.word_start_ids] = 1
        self._word_start_table = table
        self._piece_seed = keras.random.SeedGenerator(0) if c.piece_dropout else None
        # Every sublayer computes in this model's dtype policy (mixed precision reaches them all);
        # the span and tag logits are cast to float32 at the end of call(), for the tree CRF.
        policy = self.dtype_policy

        self.embedding = ScaledEmbedding(c.source_vocab_size, c.d_model, dtype=policy, name="source_embedding")
        self.positions = SinusoidalPositionalEncoding(dtype=policy, name="encoder_positions")
        self.embedding_dropout = keras.layers.Dropout(c.dropout, dtype=policy)
        self.characters = None
        if c.char_dim:
            if len(c.source_pieces) != c.source_vocab_size:
                raise ValueError(f"SpanParser's `char_dim`={c.char_dim} reads words from their pieces' strings, but "
                                 f"`source_pieces` holds {len(c.source_pieces)} pieces for a source vocabulary of "
                                 f"{c.source_vocab_size}: the training stage reads them off the source tokenizer "
                                 f"(in a notebook, pass source_pieces=tokenizer.pieces(), or char_dim=0)")
            self.characters = WordCharacters(c.source_pieces, c.d_model, c.char_dim, name="word_characters",
                                             special_ids=(c.pad_id, c.unk_id, c.bos_id, c.eos_id), dtype=policy)
        self.encoder_layers = [
            TransformerEncoderLayer(num_heads=c.num_heads, d_ff=c.d_ff, dropout=c.dropout, norm_first=c.norm_first,
                                    dtype=policy, name=f"encoder_layer_{i}")
            for i in range(c.num_layers)
        ]
        self.encoder_norm = (keras.layers.LayerNormalization(epsilon=1e-6, dtype=policy, name="encoder_norm")
                             if c.norm_first else None)
        half = c.d_model // 2
        # The span MLP's first layer is linear in the fencepost differences, so it is applied to
        # each fencepost once ([n, h]) and the differences are taken after ([n, n, h]).
        self.forward_projection = keras.layers.Dense(c.span_hidden, use_bias=False, dtype=policy, name="span_forward")
        self.backward_projection = keras.layers.Dense(c.span_hidden, dtype=policy, name="span_backward")
        self.span_norm = keras.layers.LayerNormalization(epsilon=1e-6, dtype=policy, name="span_norm")
        self.span_output = keras.layers.Dense(self.num_labels, dtype=policy, name="span_output")
        self.tag_norm = keras.layers.LayerNormalization(epsilon=1e-6, dtype=policy, name="tag_norm")
        self.tag_output = keras.layers.Dense(self.num_tags, dtype=policy, name="tag_output")
        # A named LSTM: Bidirectional names its two copies after it, and checkpoints are read by name.
        self.word_lstms = [keras.layers.Bidirectional(keras.layers.LSTM(half, return_sequences=True, dtype=policy,
                                                                        name="lstm"),
                                                      dtype=policy, name=f"word_lstm_{i}") for i in range(c.word_lstm)]
        self.lstm_dropout = keras.layers.Dropout(c.dropout, dtype=policy)
        self._half = half
        self.sentinels = None   # made by build(): a revived model has the attributes a constructed one has

    @classmethod
    def from_preset(cls, name: str = "span-parser-cpu", **overrides):
        """A new, untrained, built span parser of preset ``name`` (its ``architecture``: span_parser).

        ``overrides`` give what the treebank and vocabularies decide (``source_vocab_size``,
        ``labels``, ``tags``, ``word_start_ids``) and replace architecture settings; ``dtype`` and
        ``name`` go to ``keras.Model``.
        """
        from keras_transformer.models.presets import get_preset

        preset = get_preset(name)
        if preset.architecture != "span_parser":
            raise ValueError(f"preset '{name}' builds a {preset.architecture}, not a span parser")
        layer_kwargs = {k: overrides.pop(k) for k in ("dtype", "name") if k in overrides}
        model = cls(**preset.model_config(**overrides).to_dict(), **layer_kwargs)
        model.build()
        return model

    def build(self, input_shape=None):
        if self.built:
            return
        hidden = (None, None, self.d_model)
        self.embedding.build(None)
        if self.characters is not None:
            self.characters.build()
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
        for lstm in self.word_lstms:
            lstm.build(hidden)
        self.built = True

    @classmethod
    def from_config(cls, config):
        # Built, as from_preset's models are: a revived model holds its weights at once.
        model = cls(**config)
        model.build()
        return model

    def get_build_config(self):
        return {"built": True}

    def build_from_config(self, config):
        self.build()

    @property
    def token_embedding(self):
        """The piece embedding (keras-hub's ``Backbone.token_embedding``)."""
        return self.embedding

    def spelling(self, source_ids, read_ids=None, index=None):
        """Each word's spelling, ``[batch, n, d_model]`` (None without ``char_dim``), read from the
        pieces of ``read_ids`` (default ``source_ids``) that piece dropout left. ``index`` is
        :meth:`word_index` of ``source_ids``, computed here when not given."""
        if self.characters is None:
            return None
        read_ids = source_ids if read_ids is None else read_ids
        word_of_piece, in_word, lengths = self.word_index(source_ids) if index is None else index
        return self.characters(read_ids, word_of_piece, in_word, lengths)

    def encode(self, source_ids, training=None, read_ids=None, spelled=None, index=None):
        """Section 3.1's encoder stack over the pieces: ``[batch, pieces, d_model]``.

        ``read_ids`` (default ``source_ids``) are the ids the encoder reads, where piece dropout
        has hidden some; the words are always those of ``source_ids``. ``spelled`` is
        :meth:`spelling`'s output and ``index`` :meth:`word_index`'s, computed here when not given.
        """
        read_ids = source_ids if read_ids is None else read_ids
        mask = ops.not_equal(source_ids, self.pad_id)
        x = self.embedding(read_ids)
        if self.characters is not None:
            index = self.word_index(source_ids) if index is None else index
            spelled = self.spelling(source_ids, read_ids, index) if spelled is None else spelled   # [batch, n, d_model]
            word_of_piece, in_word, lengths = index
            in_word = ops.cast(word_membership(word_of_piece, in_word, ops.max(lengths)), x.dtype)  # [b, n, S]
            x = x + ops.matmul(ops.transpose(in_word, (0, 2, 1)), ops.cast(spelled, x.dtype))
        x = self.embedding_dropout(x + self.positions(x), training=training)
        for layer in self.encoder_layers:
            x = layer(x, padding_mask=mask, training=training)
        return x if self.encoder_norm is None else self.encoder_norm(x)

    def word_index(self, source_ids):
        """``(word_of_piece, in_word, lengths)``: the word each piece belongs to (``[batch, pieces]``,
        counted from its sentence's first word-start piece), whether it belongs to one (EOS and
        padding do not) and each sentence's number of words (``[batch]``)."""
        source_ids = ops.cast(source_ids, "int32")
        starts = ops.take(ops.convert_to_tensor(self._word_start_table), source_ids)
        word_of_piece = ops.cumsum(starts, axis=1) - 1
        in_word = ops.logical_and(ops.logical_and(ops.not_equal(source_ids, self.pad_id),
                                                  ops.not_equal(source_ids, self.config.eos_id)),
                                  word_of_piece >= 0)
        return word_of_piece, in_word, ops.sum(starts, axis=1)

    def word_states(self, source_ids, encoder_outputs, index=None):
        """``([batch, n, d_model], lengths)``: each word's state, zero past its sentence: its first
        piece's (``word_pieces="first"``) or the mean of its pieces' (``"mean"``; EOS and padding
        belong to no word). ``index`` is :meth:`word_index` of ``source_ids`` if already known."""
        source_ids = ops.cast(source_ids, "int32")
        word_of_piece, member, lengths = self.word_index(source_ids) if index is None else index
        n = ops.max(lengths)
        if self.config.word_pieces == "first":
            member = ops.cast(ops.take(ops.convert_to_tensor(self._word_start_table), source_ids), "bool")
        select = ops.cast(word_membership(word_of_piece, member, n), encoder_outputs.dtype)
        if self.config.word_pieces == "mean":
            select = select / ops.maximum(ops.sum(select, axis=2, keepdims=True), 1.0)
        return ops.matmul(select, encoder_outputs), lengths

    def call(self, source_ids, training=None):
        pieces = source_ids
        if training and self.config.piece_dropout:
            # Words are found on the original ids; only what the encoder reads is dropped.
            source_ids = ops.cast(source_ids, "int32")
            drop = keras.random.uniform(ops.shape(source_ids), seed=self._piece_seed) < self.config.piece_dropout
            real = ops.logical_and(ops.not_equal(source_ids, self.pad_id),
                                   ops.not_equal(source_ids, self.config.eos_id))
            pieces = ops.where(ops.logical_and(drop, real), self.config.unk_id, source_ids)
        index = self.word_index(source_ids)   # the words of the original ids, found once
        spelled = self.spelling(source_ids, source_ids if self.config.spell_dropped else pieces, index)
        encoded = self.encode(source_ids, training=training, read_ids=pieces, spelled=spelled, index=index)
        words, lengths = self.word_states(source_ids, encoded, index)
        batch, n = ops.shape(words)[0], ops.shape(words)[1]
        tags = self.tag_output(self.tag_norm(words))
        if self.word_lstms:
            # One masked step more than the batch's words: an LSTM cannot run over no steps at all
            # (a batch of empty sentences).
            words = ops.concatenate([words, ops.zeros((batch, 1, self.d_model), words.dtype)], axis=1)
            real = ops.arange(n + 1)[None, :] < lengths[:, None]
            for lstm in self.word_lstms:
                words = self.lstm_dropout(lstm(words, mask=real, training=training), training=training)
            words = (words * ops.cast(real, words.dtype)[:, :, None])[:, :n]
        # Fenceposts 0 .. n + 1: the start sentinel, the words, the end sentinel right after each
        # sentence's last word (zeros past it).
        sentinels = ops.cast(self.sentinels, words.dtype)   # float32 weights, read in the compute dtype
        fence = ops.concatenate([ops.broadcast_to(sentinels[0], (batch, 1, self.d_model)), words,
                                 ops.zeros((batch, 1, self.d_model), words.dtype)], axis=1)
        end = ops.one_hot(lengths + 1, n + 2, dtype=words.dtype)[:, :, None]
        fence = fence + end * sentinels[1]
        forward = self.forward_projection(fence[:, : n + 1, : self._half])   # f_0 .. f_n
        backward = self.backward_projection(fence[:, 1:, self._half:])       # b_1 .. b_n+1
        # [batch, i, j, h]: f_j - f_i + b_i+1 - b_j+1
        spans = (forward[:, None, :, :] - forward[:, :, None, :]) + (backward[:, :, None, :] - backward[:, None, :, :])
        spans = self.span_output(ops.relu(self.span_norm(spans)))
        return {"spans": ops.cast(spans, "float32"), "tags": ops.cast(tags, "float32")}

    def compile(self, optimizer="auto", **kwargs):
        """``keras.Model.compile``; ``"auto"`` is section 5.3's Adam on equation (3) with the
        span-parser-cpu recipe's warm-up and scale. The loss is :func:`span_parser_loss`, so ``fit``
        takes ``x=source_ids, y={"spans": [batch, n + 1, n + 1], "tags": [batch, n]}`` label ids,
        :data:`IGNORE` where there is none (``keras_transformer.models.span_parser.targets`` reads them off
        linearised trees)."""
        if optimizer == "auto":
            from keras_transformer.models.presets import get_preset

            optimizer = get_preset("span-parser-cpu").training.optimizer(self.d_model)
        super().compile(optimizer=optimizer, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        return span_parser_loss(y_pred, y["spans"], y["tags"])

    @property
    def bias(self) -> float:
        """The constituent bias decoding adds (chosen on dev; see ``decoding.chart.decode_chart``)."""
        return self.config.bias

    def with_bias(self, bias: float) -> None:
        """Sets the decoding bias (recorded in ``get_config``, so a saved model keeps it)."""
        self.config = dataclasses.replace(self.config, bias=float(bias))

    # How the model is used, asked of the model rather than of its type (as of the Transformer).
    architecture = "span_parser"

    def objective(self, label_smoothing: float = 0.0, target_pieces=None):
        """The tree CRF and tagging loss per word (:mod:`.objective`); label smoothing does not apply."""
        from keras_transformer.models.span_parser.objective import SpanObjective

        if target_pieces is None:
            raise ValueError("a span parser learns from linearised trees: give the target vocabulary's pieces")
        return SpanObjective(self, target_pieces)

    def decoder(self, tokenizer, target_tokenizer=None, decoding=None):
        """A :class:`~.chart_parser.ChartParser`: every span scored, the best tree by CKY (no beam to set)."""
        from keras_transformer.models.span_parser.chart_parser import ChartParser

        return ChartParser(self, tokenizer)

    def export_decoder(self, path, tokenizer, target_tokenizer=None, decoding=None, constraint=None,
                       format="savedmodel", quantization="int8"):
        """The span scores as one SavedModel (:func:`~.chart_export.export_chart_parser`), read by CKY; no
        other ``format`` holds a chart search."""
        from keras_transformer.decoding.export import check_format
        from keras_transformer.models.span_parser.chart_export import export_chart_parser

        if check_format(format) != "savedmodel":
            from keras_transformer.decoding.ctranslate2_export import check_convertible

            check_convertible(self)

        return export_chart_parser(self, tokenizer, path)

    def get_config(self):
        config = super().get_config()
        config.update(self.config.to_dict())
        return config


def span_parser_loss(outputs, span_labels, tag_labels):
    """The gold trees' negative log-probabilities under the tree CRF per word, plus the mean
    cross-entropy of the tags over the real words (``IGNORE`` elsewhere)."""
    from keras_transformer.models.span_parser.tree_crf import tree_crf_losses

    tag_labels = ops.cast(tag_labels, "int32")
    keep = ops.cast(ops.not_equal(tag_labels, IGNORE), "float32")
    words = ops.maximum(ops.sum(keep), 1.0)
    tags = keras.losses.sparse_categorical_crossentropy(ops.maximum(tag_labels, 0), outputs["tags"], from_logits=True)
    return ops.sum(tree_crf_losses(outputs["spans"], span_labels)) / words + ops.sum(tags * keep) / words
