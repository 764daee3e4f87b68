"""The encoder-decoder Transformer model (section 3, Figure 1)."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import keras
from keras import ops

from keras_transformer.layers.attention import causal_mask
from keras_transformer.layers.decoder import TransformerDecoderLayer
from keras_transformer.layers.embedding import ScaledEmbedding
from keras_transformer.layers.encoder import TransformerEncoderLayer
from keras_transformer.layers.positional_encoding import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
)
from keras_transformer.layers.word_alignment import WordAlignment
from keras_transformer.models.config import TransformerConfig
from keras_transformer.models.presets import DecodingSettings, TrainingRecipe, get_preset
from keras_transformer.training.compile import RecipeCompile


class DecoderOutput(NamedTuple):
    """What :meth:`Transformer.decode` returns, always the same three fields."""

    logits: Any
    cache: dict | None
    attention: list | None


@keras.saving.register_keras_serializable(package="keras_transformer")
class Transformer(RecipeCompile, keras.Model):
    """Encoder-decoder Transformer of "Attention Is All You Need".

    Takes ``(source_ids, target_input_ids)`` (or a dict with those keys) of int ids padded with
    ``pad_id`` and returns float32 logits ``[batch, target_length, target_vocab_size]``, so
    ``model.fit`` works on datasets of ``((source_ids, target_input_ids), target_output_ids)``.

    Build from a preset with ``Transformer.from_preset("base", vocab_size=37000)`` or give the
    architecture (a ``TransformerConfig``; the defaults are the base model of Table 3):

    Args:
        vocab_size: the shared source/target vocabulary (section 3.4), or ``source_vocab_size``
            and ``target_vocab_size`` with ``share_embeddings=False`` for separate ones.
        num_layers: N, for encoder and decoder (``num_encoder_layers`` / ``num_decoder_layers``
            set them apart). d_model, num_heads (h), d_k, d_v (default d_model / h), d_ff:
            section 3's sizes.
        dropout: P_drop on sublayer outputs and embedding sums (5.4); ``attention_dropout`` and
            ``relu_dropout`` inside attention and the FFN (tensor2tensor's, 0 in the paper).
        positional_encoding: ``sinusoidal`` (3.5) or ``learned`` (Table 3 row E, ``max_length``
            positions). share_embeddings / tie_output_embeddings: section 3.4's weight sharing.
        norm_first: LayerNorm before each sublayer and after each stack (pre-norm) instead of the
            paper's LayerNorm(x + Sublayer(x)) (``PreNormResidual``).
        word_alignment, word_start_ids, slot_ids: add to each decoder input the encoder state of
            the next word to cover, for parsing (:class:`~keras_transformer.layers.word_alignment.WordAlignment`;
            the ids from :func:`~keras_transformer.layers.word_alignment.alignment_ids`); ``tagger``
            a slot classifier over them, ``word_pieces`` how a word's state is read.
        pad_id, bos_id, eos_id: the vocabulary's special ids (the tokenizer's must match).
        training_recipe: ``compile()``'s defaults (a ``TrainingRecipe`` or its dict).
        decoding: how the model translates by default (a ``DecodingSettings`` or its dict: section
            6.1's beam, alpha and length, and whether paragraphs go sentence by sentence); a
            ``Translator`` given none decodes with these, so a saved model decodes as its preset.
        **kwargs: ``keras.Model`` arguments (``name``, ``dtype``).

    ``encode`` and ``decode`` are callable separately; ``decode`` takes a cache from
    ``init_cache`` for incremental decoding.
    """

    def __init__(self, vocab_size: int | None = None, *, training_recipe=None, decoding=None, **kwargs):
        # The architecture settings are TransformerConfig's fields (one place for their defaults
        # and checks); everything else goes to keras.Model.
        settings = {k: kwargs.pop(k) for k in list(kwargs) if k in TransformerConfig.field_names()}
        super().__init__(**kwargs)
        self.config = TransformerConfig(vocab_size=vocab_size, **settings)
        # compile()'s defaults; part of get_config(), so a reloaded model compiles the same way.
        if isinstance(training_recipe, dict):
            training_recipe = TrainingRecipe(**training_recipe)
        self.training_recipe = training_recipe or TrainingRecipe()
        self.decoding = (DecodingSettings.from_dict(decoding) if isinstance(decoding, dict)
                         else decoding or DecodingSettings())
        # Whether the decoding was given (a preset's, or a saved config's) rather than defaulted: a
        # file saved before models kept their decoding decodes as its run's preset instead
        # (``checkpoints.saved_model.run_preset_decoding``). Set here, so that a revived model is the
        # object a constructed one is.
        self.decoding_saved = decoding is not None
        c = self.config
        policy = self.dtype_policy

        self.source_embedding = ScaledEmbedding(
            c.source_vocab_size, c.d_model, dtype=policy, name="source_embedding"
        )
        if c.share_embeddings:
            self.target_embedding = self.source_embedding
        else:
            self.target_embedding = ScaledEmbedding(
                c.target_vocab_size, c.d_model, dtype=policy, name="target_embedding"
            )
        if c.positional_encoding == "learned":
            self.encoder_positions = LearnedPositionalEmbedding(
                c.max_length, dtype=policy, name="encoder_positions"
            )
            self.decoder_positions = LearnedPositionalEmbedding(
                c.max_length, dtype=policy, name="decoder_positions"
            )
        else:
            self.encoder_positions = SinusoidalPositionalEncoding(dtype=policy, name="encoder_positions")
            self.decoder_positions = SinusoidalPositionalEncoding(dtype=policy, name="decoder_positions")
        # Section 5.4: dropout "to the sums of the embeddings and the positional encodings".
        self.encoder_embedding_dropout = keras.layers.Dropout(c.dropout, dtype=policy)
        self.decoder_embedding_dropout = keras.layers.Dropout(c.dropout, dtype=policy)
        layer_kwargs = dict(
            num_heads=c.num_heads,
            d_ff=c.d_ff,
            d_k=c.d_k,
            d_v=c.d_v,
            dropout=c.dropout,
            attention_dropout=c.attention_dropout,
            relu_dropout=c.relu_dropout,
            layer_norm_epsilon=c.layer_norm_epsilon,
            norm_first=c.norm_first,
            dtype=policy,
        )
        self.encoder_layers = [
            TransformerEncoderLayer(**layer_kwargs, name=f"encoder_layer_{i}")
            for i in range(c.num_encoder_layers)
        ]
        self.decoder_layers = [
            TransformerDecoderLayer(**layer_kwargs, name=f"decoder_layer_{i}")
            for i in range(c.num_decoder_layers)
        ]
        # Pre-norm stacks end in a LayerNorm of their own (the sublayers normalize only their inputs).
        self.encoder_norm = self.decoder_norm = None
        if c.norm_first:
            self.encoder_norm = keras.layers.LayerNormalization(
                epsilon=c.layer_norm_epsilon, dtype=policy, name="encoder_norm")
            self.decoder_norm = keras.layers.LayerNormalization(
                epsilon=c.layer_norm_epsilon, dtype=policy, name="decoder_norm")
        self.word_alignment = None
        if c.word_alignment:
            if not c.word_start_ids or not c.slot_ids:
                raise ValueError("Invalid Transformer setting `word_alignment`=True: it needs `word_start_ids` and "
                                 "`slot_ids` (word_alignment.alignment_ids(source_tok, target_tok) reads them)")
            self.word_alignment = WordAlignment(c.word_start_ids, c.slot_ids, c.source_vocab_size, c.target_vocab_size,
                                                c.tagger, c.word_pieces, (c.pad_id, c.bos_id, c.eos_id),
                                                dtype=policy, name="word_alignment")
        self.output_projection = None
        if not c.tie_output_embeddings:
            self.output_projection = keras.layers.Dense(
                c.target_vocab_size, use_bias=False, dtype=policy, name="output_projection"
            )

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_preset(cls, name, vocab_size=None, **overrides):
        """A new, untrained, built model of preset ``name`` (``keras_transformer.preset_names()``).

        ``overrides`` replace architecture settings (``num_layers=2``, ``dropout=0.0``, ...);
        ``dtype`` (e.g. ``"mixed_bfloat16"``) and ``name`` go to ``keras.Model``; the preset's
        training recipe becomes the default of ``compile()``, its decoding the translator's default.
        """
        preset = get_preset(name)
        if vocab_size is not None:
            overrides["vocab_size"] = vocab_size
        layer_kwargs = {k: overrides.pop(k) for k in ("dtype", "name") if k in overrides}
        config = preset.model_config(**overrides)
        model = cls(**config.to_dict(), training_recipe=preset.training, decoding=preset.decoding, **layer_kwargs)
        model.build()  # count_params() and summary() work at once, as keras-hub's presets do
        return model

    def build(self, input_shape=None):
        hidden = (None, None, self.config.d_model)

        def build_once(layer, *shapes):
            # The target embedding is the source embedding when the vocabulary is shared.
            if layer is not None and not layer.built:
                layer.build(*shapes)

        build_once(self.source_embedding, None)
        build_once(self.target_embedding, None)
        build_once(self.encoder_positions, hidden)
        build_once(self.decoder_positions, hidden)
        for layer in self.encoder_layers:
            build_once(layer, hidden)
        for layer in self.decoder_layers:
            build_once(layer, hidden, hidden)
        build_once(self.encoder_norm, hidden)
        build_once(self.decoder_norm, hidden)
        build_once(self.output_projection, hidden)
        build_once(self.word_alignment, hidden)
        self.built = True

    def get_build_config(self):
        return {"built": True}

    def build_from_config(self, config):
        self.build()

    # ------------------------------------------------------------------ forward pass

    def _split_inputs(self, inputs):
        if isinstance(inputs, dict):
            return inputs["source_ids"], inputs["target_ids"]
        if isinstance(inputs, (list, tuple)) and len(inputs) == 2:
            return inputs[0], inputs[1]
        raise ValueError("Transformer expects inputs (source_ids, target_input_ids) or a dict with keys 'source_ids' "
                         f"and 'target_ids'; received {type(inputs).__name__}: {inputs!r}")

    @property
    def token_embedding(self):
        """The source token embedding (keras-hub's ``Backbone.token_embedding``)."""
        return self.source_embedding

    def padding_mask(self, token_ids):
        """``True`` at real tokens, ``False`` at ``pad_id``."""
        return ops.not_equal(token_ids, self.config.pad_id)

    def encode(self, source_ids, training=None, return_attention_scores=False):
        """The encoder stack (section 3.1): ``[batch, source_length, d_model]``.

        With ``return_attention_scores`` also a list of per-layer self-attention weights.
        """
        mask = self.padding_mask(source_ids)
        x = self.source_embedding(source_ids)
        x = x + self.encoder_positions(x)
        x = self.encoder_embedding_dropout(x, training=training)
        scores = []
        for layer in self.encoder_layers:
            x, weights = layer(x, padding_mask=mask, training=training, return_attention_scores=True)
            scores.append(weights)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return (x, scores) if return_attention_scores else x

    def word_states(self, source_ids, encoder_outputs):
        """Per word, the encoder state of its first piece (``decode``'s ``word_states``), or
        ``None`` for a model without ``word_alignment``."""
        if self.word_alignment is None:
            return None
        return self.word_alignment.word_states(source_ids, encoder_outputs)

    def decode(
        self,
        target_ids,
        encoder_outputs,
        encoder_padding_mask=None,
        cache=None,
        cache_index=None,
        training=None,
        return_attention_scores=False,
        logits_mask=None,
        word_states=None,
    ):
        """The decoder stack and the pre-softmax projection: float32 logits.

        Args:
            target_ids: ``[batch, length]`` decoder inputs (BOS followed by the shifted
                target). In incremental decoding, only the newest position(s).
            encoder_outputs: from ``encode``.
            encoder_padding_mask: ``padding_mask(source_ids)``.
            cache, cache_index: from ``init_cache``; ``target_ids`` holds positions
                ``cache_index ...`` and attends to all earlier positions through the cache.
            logits_mask: boolean ``[batch, length]``: logits only where it is ``True``, as
                ``[positions, vocab]`` in row-major order. Training needs none at padding, and the
                projection onto the vocabulary is a step's largest matmul at small ``d_model``.
            word_states: ``word_states(source_ids, encoder_outputs)``, required by a model with
                ``word_alignment`` unless the cache holds them (``init_cache(..., source_ids)``).

        Returns a :class:`DecoderOutput`: ``logits``; ``cache``, the updated cache (None without
        one); ``attention``, per layer ``{"self": ..., "cross": ...}`` (None unless
        ``return_attention_scores``).
        """
        start = 0 if cache_index is None else cache_index
        x = self.target_embedding(target_ids)
        x = x + self.decoder_positions(x, start_index=start)
        slots = tags = None
        if self.word_alignment is not None:
            if cache is not None:
                word_states = cache["words"]
            if word_states is None:
                raise ValueError("a model with word_alignment decodes with word_states=model.word_states(...)")
            pointer, slots = self.word_alignment.pointer(target_ids, None if cache is None else cache["slots"])
            x = x + self.word_alignment(word_states, pointer)
            if self.config.tagger == "fused":
                tags = self.word_alignment.tag_logits(word_states, pointer)
        x = self.decoder_embedding_dropout(x, training=training)
        length = ops.shape(target_ids)[1]
        if cache is None:
            mask = causal_mask(length, length)
        else:
            mask = causal_mask(length, start + length, start)
        new_self_caches, scores = [], []
        for i, layer in enumerate(self.decoder_layers):
            outputs = layer(
                x,
                encoder_outputs,
                self_attention_mask=mask,
                encoder_padding_mask=encoder_padding_mask,
                self_cache=None if cache is None else cache["self"][i],
                cache_index=cache_index,
                cross_cache=None if cache is None else cache["cross"][i],
                training=training,
                return_attention_scores=True,
            )
            if cache is None:
                x, weights = outputs
            else:
                x, layer_cache, weights = outputs
                new_self_caches.append(layer_cache)
            scores.append(weights)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        if logits_mask is not None:
            positions = ops.nonzero(ops.reshape(logits_mask, (-1,)))[0]
            x = ops.take(ops.reshape(x, (-1, self.config.d_model)), positions, axis=0)
            if tags is not None:
                tags = ops.take(ops.reshape(tags, (-1, self.config.target_vocab_size)), positions, axis=0)
        # Logits, softmax and loss stay in float32 under mixed precision.
        project = self.target_embedding.project if self.output_projection is None else self.output_projection
        logits = ops.cast(project(x), "float32") + (0.0 if tags is None else tags)
        if cache is not None:
            cache = {**cache, "self": new_self_caches, **({} if slots is None else {"slots": slots})}
        return DecoderOutput(logits, cache, scores if return_attention_scores else None)

    def init_cache(self, encoder_outputs, source_ids=None):
        """Cache for incremental decoding. ``self``: per decoder layer, keys/values ``[batch,
        heads, 0, d_k|d_v]``, one position appended per decoded token (a decoding loop declares
        that axis as growing: ``decoding.greedy.loop_shapes``). ``cross``: per layer, the encoder outputs projected to
        keys and values once per sentence instead of once per step. With ``word_alignment``
        (``source_ids`` needed): ``words``, the per-sentence word states, and ``slots``, the
        running count of slot tokens, which points at the next word.
        """
        c = self.config
        batch = ops.shape(encoder_outputs)[0]
        dtype = self.compute_dtype
        self_caches = [
            {
                "key": ops.zeros((batch, c.num_heads, 0, c.d_k), dtype=dtype),
                "value": ops.zeros((batch, c.num_heads, 0, c.d_v), dtype=dtype),
            }
            for _ in self.decoder_layers
        ]
        cross_caches = [
            layer.cross_attention.compute_cache(encoder_outputs) for layer in self.decoder_layers
        ]
        cache = {"self": self_caches, "cross": cross_caches}
        if self.word_alignment is not None:
            if source_ids is None:
                raise ValueError("a model with word_alignment needs init_cache(..., source_ids=...)")
            cache["words"] = self.word_states(source_ids, encoder_outputs)
            cache["slots"] = ops.zeros((batch,), dtype="int32")
        return cache

    def call(self, inputs, training=None):
        source_ids, target_ids = self._split_inputs(inputs)
        encoder_outputs = self.encode(source_ids, training=training)
        return self.decode(
            target_ids, encoder_outputs, self.padding_mask(source_ids), training=training,
            word_states=self.word_states(source_ids, encoder_outputs),
        ).logits

    # ------------------------------------------------------------------ training and decoding

    # How the model is used, asked of the model rather than of its type (the span parser answers too).
    architecture = "transformer"

    def objective(self, label_smoothing: float = 0.0, target_pieces=None):
        """Section 5.4's label-smoothed cross-entropy, as the training stage's step minimises it."""
        from keras_transformer.training.objectives import TranslationObjective

        return TranslationObjective(self, label_smoothing)

    def decoder(self, tokenizer, target_tokenizer=None, decoding=None):
        """A :class:`~keras_transformer.decoding.translator.Translator` of raw strings (section 6.1's beam search)."""
        from keras_transformer.decoding.translator import Translator

        return Translator(self, tokenizer, target_tokenizer, decoding)

    def export_decoder(self, path, tokenizer, target_tokenizer=None, decoding=None, constraint=None,
                       format="savedmodel", quantization="int8"):
        """The decoder as one SavedModel (:func:`~keras_transformer.decoding.export.export_translator`), or
        with ``format="ctranslate2"`` as a CTranslate2 directory in ``quantization``'s precision
        (:func:`~keras_transformer.decoding.ctranslate2_export.convert_to_ctranslate2`)."""
        from keras_transformer.decoding.export import check_format, export_translator

        if check_format(format, constraint) == "ctranslate2":
            from keras_transformer.decoding.ctranslate2_export import convert_to_ctranslate2

            return convert_to_ctranslate2(self, tokenizer, path, quantization, decoding, target_tokenizer)
        return export_translator(self, tokenizer, path, decoding, target_tokenizer, constraint)

    def get_config(self):
        config = super().get_config()
        config.update(self.config.to_dict())
        config["training_recipe"] = dataclasses.asdict(self.training_recipe)
        config["decoding"] = dataclasses.asdict(self.decoding)
        return config

    @classmethod
    def from_config(cls, config):
        # Built, as from_preset's models are: a revived model holds its weights at once (set_weights,
        # count_params), like keras-hub's functional backbones.
        model = cls(**config)
        model.build()
        return model
