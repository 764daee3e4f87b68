"""Every public layer through the harness Keras and keras-hub test their own layers with.

``KerasLayerHarness`` is ``keras.src.testing.TestCase.run_layer_test`` (serialization, build,
symbolic and eager calls, a training step, mixed precision), called as Keras calls it for its
``MultiHeadAttention``; ``KerasHubLayerHarness`` is keras-hub's ``run_layer_test`` (which adds its
``run_serialization_test`` and ``run_precision_test`` over mixed_float16, mixed_bfloat16 and
bfloat16) and ``run_model_saving_test``, called as keras-hub calls them for its
``TransformerEncoder``, ``TransformerDecoder``, ``CachedMultiHeadAttention`` and position layers.
Tiny shapes: the whole file runs in well under a minute.
"""

from __future__ import annotations

import keras
import numpy as np
from absl.testing import parameterized
from keras import ops

from keras_transformer.layers.attention import MultiHeadAttention
from keras_transformer.layers.decoder import TransformerDecoderLayer
from keras_transformer.layers.embedding import ScaledEmbedding
from keras_transformer.layers.encoder import TransformerEncoderLayer
from keras_transformer.layers.feed_forward import PositionwiseFeedForward
from keras_transformer.layers.positional_encoding import LearnedPositionalEmbedding, SinusoidalPositionalEncoding
from keras_transformer.layers.residual import PostNormResidual, PreNormResidual
from keras_transformer.layers.word_alignment import WordAlignment
from keras_transformer.layers.word_characters import WordCharacters
from tests.keras_transformer import keras_harness

RNG = np.random.default_rng(0)
# Tensors, as keras-hub's tests give (Keras finds the shapes of call arguments that are tensors).
HIDDEN = ops.convert_to_tensor(RNG.uniform(size=(2, 4, 6)), "float32")
MEMORY = ops.convert_to_tensor(RNG.uniform(size=(2, 3, 6)), "float32")
POINTER = ops.convert_to_tensor([[0, 1, 1, 2, 3], [0, 0, 1, 4, 4]], "int32")
LAYER_KWARGS = dict(num_heads=2, d_ff=4, dropout=0.1, attention_dropout=0.1, relu_dropout=0.1)
ALIGNMENT_KWARGS = dict(word_start_ids=[4, 5], slot_ids=[6, 7], source_vocab_size=10, target_vocab_size=10)
# Pieces of a tiny vocabulary: 4, 5, 7 begin a word ("▁the", "▁walk" + "ing", "▁dog").
PIECES = ["<pad>", "<unk>", "<s>", "</s>", "\u2581the", "\u2581walk", "ing", "\u2581dog"]
CHARACTERS_KWARGS = dict(pieces=PIECES, units=8, char_dim=4, special_ids=(0, 1, 2, 3))
# "the walking dog </s>" | "dog </s>" and padding: what SpanParser.word_index gives WordCharacters.
SPELLING_INPUTS = {
    "piece_ids": ops.convert_to_tensor([[4, 5, 6, 7, 3], [7, 3, 0, 0, 0]], "int32"),
    "word_of_piece": ops.convert_to_tensor([[0, 1, 1, 2, 2], [0, 0, 0, 0, 0]], "int32"),
    "member": ops.convert_to_tensor([[1, 1, 1, 1, 0], [1, 0, 0, 0, 0]], "bool"),
    "lengths": ops.convert_to_tensor([3, 1], "int32"),
}


class KerasLayerHarness(keras_harness.KerasTestCase):
    """``keras.src.testing.TestCase.run_layer_test``.

    Multi-input layers are given ``input_shape`` dicts (``{"query_shape": ...}``), as Keras's own
    ``MultiHeadAttention`` test gives them, and ``run_training_check=False`` as there: Keras's
    training model passes the dict of inputs as the layer's first argument, which no multi-input
    layer takes. keras-hub's harness (below) trains them, with the inputs as keyword arguments.
    """

    def test_multi_head_attention(self):
        self.run_layer_test(
            MultiHeadAttention,
            init_kwargs={"num_heads": 2, "key_dim": 3, "dropout": 0.1},
            input_shape={"query_shape": (2, 4, 6), "value_shape": (2, 3, 6)},
            expected_output_shape=(2, 4, 6),
            expected_num_trainable_weights=8,
            expected_num_non_trainable_weights=0,
            expected_num_seed_generators=1,
            expected_num_losses=0,
            supports_masking=True,
            run_training_check=False,
        )

    # One variant each here (the layer's code paths differ only in where the norms sit); keras-hub's
    # harness below runs both.
    @parameterized.named_parameters(("pre_norm", True))
    def test_encoder_layer(self, norm_first):
        self.run_layer_test(
            TransformerEncoderLayer,
            init_kwargs={**LAYER_KWARGS, "norm_first": norm_first},
            input_shape=(2, 4, 6),
            expected_output_shape=(2, 4, 6),
            expected_num_trainable_weights=16,
            expected_num_non_trainable_weights=0,
            expected_num_seed_generators=4,
            expected_num_losses=0,
            supports_masking=True,
        )

    @parameterized.named_parameters(("post_norm", False))
    def test_decoder_layer(self, norm_first):
        self.run_layer_test(
            TransformerDecoderLayer,
            init_kwargs={**LAYER_KWARGS, "norm_first": norm_first},
            input_shape={"inputs_shape": (2, 4, 6), "encoder_outputs_shape": (2, 3, 6)},
            expected_output_shape=(2, 4, 6),
            expected_num_trainable_weights=26,
            expected_num_non_trainable_weights=0,
            expected_num_seed_generators=6,
            expected_num_losses=0,
            supports_masking=True,
            run_training_check=False,
        )

    def test_scaled_embedding(self):
        self.run_layer_test(
            ScaledEmbedding,
            init_kwargs={"vocab_size": 10, "d_model": 6},
            input_shape=(2, 4),
            input_dtype="int32",
            expected_output_shape=(2, 4, 6),
            expected_num_trainable_weights=1,
            expected_num_non_trainable_weights=0,
            expected_num_seed_generators=0,
        )

    def test_sinusoidal_positional_encoding(self):
        self.run_layer_test(
            SinusoidalPositionalEncoding,
            init_kwargs={"max_wavelength": 10000.0},
            input_shape=(2, 4, 6),
            expected_output_shape=(2, 4, 6),
            expected_num_trainable_weights=0,
            expected_num_non_trainable_weights=0,
            expected_num_seed_generators=0,
        )

    def test_learned_positional_embedding(self):
        self.run_layer_test(
            LearnedPositionalEmbedding,
            init_kwargs={"max_length": 8},
            input_shape=(2, 4, 6),
            expected_output_shape=(2, 4, 6),
            expected_num_trainable_weights=1,
            expected_num_non_trainable_weights=0,
            expected_num_seed_generators=0,
        )

    def test_feed_forward(self):
        self.run_layer_test(
            PositionwiseFeedForward,
            init_kwargs={"d_ff": 4, "relu_dropout": 0.1},
            input_shape=(2, 4, 6),
            expected_output_shape=(2, 4, 6),
            expected_num_trainable_weights=4,
            expected_num_non_trainable_weights=0,
            expected_num_seed_generators=1,
        )

    @parameterized.named_parameters(("post_norm", PostNormResidual), ("pre_norm", PreNormResidual))
    def test_residual(self, cls):
        self.run_layer_test(
            cls,
            init_kwargs={"dropout": 0.1, "epsilon": 1e-6},
            input_shape={"residual_shape": (2, 4, 6), "sublayer_output_shape": (2, 4, 6)},
            expected_output_shape=(2, 4, 6),
            expected_num_trainable_weights=2,
            expected_num_non_trainable_weights=0,
            expected_num_seed_generators=1,
            run_training_check=False,
        )

    @parameterized.named_parameters(("none", "none", 1), ("fused", "fused", 3))
    def test_word_alignment(self, tagger, weights):
        self.run_layer_test(
            WordAlignment,
            init_kwargs={**ALIGNMENT_KWARGS, "tagger": tagger},
            input_shape={"word_states_shape": (2, 4, 6), "pointer_shape": (2, 5)},
            input_dtype={"word_states_shape": "float32", "pointer_shape": "int32"},
            expected_output_shape=(2, 5, 6),
            expected_num_trainable_weights=weights,
            expected_num_non_trainable_weights=0,
            expected_num_seed_generators=0,
            run_training_check=False,
        )

    def test_word_characters(self):
        # Keras's harness makes its own inputs from shapes (values 0, 1, 2): `member` comes as
        # 0/1/2 ints, which the layer reads as booleans. The number of words is max(lengths), a
        # value, so the symbolic output has an unknown second dimension (None matches any).
        self.run_layer_test(
            WordCharacters,
            init_kwargs=CHARACTERS_KWARGS,
            input_shape={"piece_ids_shape": (2, 5), "word_of_piece_shape": (2, 5), "member_shape": (2, 5),
                         "lengths_shape": (2,)},
            input_dtype={"piece_ids_shape": "int32", "word_of_piece_shape": "int32", "member_shape": "int32",
                         "lengths_shape": "int32"},
            expected_output_shape=(2, None, 8),
            expected_num_trainable_weights=7,
            expected_num_non_trainable_weights=0,
            expected_num_seed_generators=0,
            run_training_check=False,
        )


class KerasHubLayerHarness(keras_harness.KerasHubTestCase):
    """keras-hub's ``run_layer_test`` (serialization, build, symbolic and eager calls, a training
    step, three precision policies) and ``run_model_saving_test`` (a ``.keras`` round trip), as
    keras-hub calls them for its TransformerEncoder / TransformerDecoder / CachedMultiHeadAttention."""

    def test_multi_head_attention(self):
        self.run_layer_test(
            cls=MultiHeadAttention,
            init_kwargs={"num_heads": 2, "key_dim": 3, "dropout": 0.1},
            input_data={"query": HIDDEN, "value": MEMORY},
            expected_output_shape=(2, 4, 6),
            expected_num_trainable_weights=8,
            expected_num_non_trainable_variables=1,  # dropout rng seed
        )

    @parameterized.named_parameters(("post_norm", False), ("pre_norm", True))
    def test_encoder_layer(self, norm_first):
        self.run_layer_test(
            cls=TransformerEncoderLayer,
            init_kwargs={**LAYER_KWARGS, "norm_first": norm_first},
            input_data=HIDDEN,
            expected_output_shape=(2, 4, 6),
            expected_num_trainable_weights=16,
            expected_num_non_trainable_variables=4,  # dropout rng seeds
        )

    @parameterized.named_parameters(("post_norm", False), ("pre_norm", True))
    def test_decoder_layer(self, norm_first):
        self.run_layer_test(
            cls=TransformerDecoderLayer,
            init_kwargs={**LAYER_KWARGS, "norm_first": norm_first},
            input_data={"inputs": HIDDEN, "encoder_outputs": MEMORY},
            expected_output_shape=(2, 4, 6),
            expected_num_trainable_weights=26,
            expected_num_non_trainable_variables=6,  # dropout rng seeds
        )

    def test_scaled_embedding(self):
        self.run_layer_test(
            cls=ScaledEmbedding,
            init_kwargs={"vocab_size": 10, "d_model": 6},
            input_data=ops.convert_to_tensor([[1, 2, 3, 0], [4, 5, 0, 0]], "int32"),
            expected_output_shape=(2, 4, 6),
            expected_num_trainable_weights=1,
        )

    def test_sinusoidal_positional_encoding(self):
        self.run_layer_test(
            cls=SinusoidalPositionalEncoding,
            init_kwargs={"max_wavelength": 10000.0},
            input_data=HIDDEN,
            expected_output_shape=(2, 4, 6),
        )

    def test_learned_positional_embedding(self):
        self.run_layer_test(
            cls=LearnedPositionalEmbedding,
            init_kwargs={"max_length": 8},
            input_data=HIDDEN,
            expected_output_shape=(2, 4, 6),
            expected_num_trainable_weights=1,
        )

    def test_feed_forward(self):
        self.run_layer_test(
            cls=PositionwiseFeedForward,
            init_kwargs={"d_ff": 4, "relu_dropout": 0.1},
            input_data=HIDDEN,
            expected_output_shape=(2, 4, 6),
            expected_num_trainable_weights=4,
            expected_num_non_trainable_variables=1,
        )

    @parameterized.named_parameters(("post_norm", PostNormResidual), ("pre_norm", PreNormResidual))
    def test_residual(self, cls):
        self.run_layer_test(
            cls=cls,
            init_kwargs={"dropout": 0.1, "epsilon": 1e-6},
            input_data={"residual": HIDDEN, "sublayer_output": HIDDEN * 2.0},
            expected_output_shape=(2, 4, 6),
            expected_num_trainable_weights=2,
            expected_num_non_trainable_variables=1,
            # Adapted for the pre-norm residual: its only weights are its norm's, which its call
            # does not use (PreNormResidual's docstring), so a step training it alone has no
            # gradient at all. test_every_weight_of_the_stacked_layers_is_trained checks that the
            # encoder and decoder layers' calls, which use it, train it.
            run_training_check=cls is PostNormResidual,
        )

    def test_residual_output_spec_under_mixed_precision(self):
        """keras-hub's precision check asks ``compute_output_spec`` of the inputs as they come: in a
        mixed-precision stack the residual stream arrives in float32 and the sublayer's output in
        the compute dtype."""
        for cls in (PostNormResidual, PreNormResidual):
            for name in ("mixed_float16", "mixed_bfloat16"):
                policy = keras.mixed_precision.Policy(name)
                layer = cls(dtype=policy)
                spec = layer.compute_output_spec(keras.KerasTensor((2, 4, 6), "float32"),
                                                 keras.KerasTensor((2, 4, 6), policy.compute_dtype))
                output = layer(HIDDEN, ops.cast(HIDDEN, policy.compute_dtype))
                self.assertEqual((tuple(spec.shape), spec.dtype), ((2, 4, 6), policy.compute_dtype))
                self.assertDTypeEqual(output, spec.dtype)

    def test_every_weight_of_the_stacked_layers_is_trained(self):
        import tensorflow as tf

        for norm_first in (False, True):
            layers_and_inputs = (
                (TransformerEncoderLayer(**LAYER_KWARGS, norm_first=norm_first), (HIDDEN,)),
                (TransformerDecoderLayer(**LAYER_KWARGS, norm_first=norm_first), (HIDDEN, MEMORY)),
            )
            for layer, inputs in layers_and_inputs:
                with tf.GradientTape() as tape:
                    loss = ops.sum(ops.square(layer(*inputs, training=True)))
                gradients = tape.gradient(loss, layer.trainable_weights)
                for weight, gradient in zip(layer.trainable_weights, gradients):
                    self.assertIsNotNone(gradient, msg=weight.path)
                    self.assertGreater(float(ops.max(ops.abs(gradient))), 0.0, msg=weight.path)

    @parameterized.named_parameters(("none", "none", 1), ("fused", "fused", 3))
    def test_word_alignment(self, tagger, weights):
        self.run_layer_test(
            cls=WordAlignment,
            init_kwargs={**ALIGNMENT_KWARGS, "tagger": tagger},
            input_data={"word_states": HIDDEN, "pointer": POINTER},
            expected_output_shape=(2, 5, 6),
            expected_num_trainable_weights=weights,
        )

    def test_word_characters(self):
        # Not run_layer_test: its one expected shape is asserted of the symbolic call too, where
        # the number of words (max(lengths), a value) is unknown. Its other checks, as it runs them:
        layer = WordCharacters(**CHARACTERS_KWARGS)
        self.run_serialization_test(layer)
        outputs = layer(**SPELLING_INPUTS)
        self.assertEqual(tuple(outputs.shape), (2, 3, 8))
        self.assertEqual(keras.backend.standardize_dtype(outputs.dtype), "float32")
        self.assertLen(layer.trainable_weights, 7)
        symbolic = WordCharacters(**CHARACTERS_KWARGS)(
            **{k: keras.KerasTensor(tuple(v.shape), keras.backend.standardize_dtype(v.dtype))
               for k, v in SPELLING_INPUTS.items()})
        self.assertEqual(tuple(symbolic.shape), (2, None, 8))
        self.run_precision_test(WordCharacters, CHARACTERS_KWARGS, SPELLING_INPUTS)

    def test_word_characters_and_alignment_survive_a_keras_file(self):
        for cls, kwargs, inputs in (
            (WordCharacters, CHARACTERS_KWARGS, SPELLING_INPUTS),
            (WordAlignment, {**ALIGNMENT_KWARGS, "tagger": "fused"},
             {"word_states": HIDDEN, "pointer": POINTER}),
        ):
            self._run_layer_saving_test(cls, kwargs, inputs)

    def _run_layer_saving_test(self, cls, kwargs, inputs):
        """keras-hub's ``run_model_saving_test`` for a layer: in a functional model (a layer alone has
        no ``save``), saved to a ``.keras`` file and loaded, where Keras rebuilds it from its
        ``get_build_config``: the same class back, the same outputs."""
        symbolic = {k: keras.Input(batch_shape=(None,) + tuple(v.shape[1:]),
                                   dtype=keras.backend.standardize_dtype(v.dtype)) for k, v in inputs.items()}
        model = keras.Model(symbolic, cls(**kwargs)(**symbolic))
        outputs = model(inputs)
        path = self.get_temp_dir() + f"/{cls.__name__}.keras"
        model.save(path)
        restored = keras.models.load_model(path)
        layer = [sub for sub in restored.layers if isinstance(sub, cls)]
        self.assertLen(layer, 1)
        self.assertAllClose(outputs, restored(inputs))


def test_the_harness_keeps_the_session_s_tokenizer(tokenizer):
    """The harness classes leave TensorFlow's kernel cache alone: the suite's session tokenizer
    (a SentencePiece resource) still works after their ``setUp``."""
    before = tokenizer.tokenize(["A small package."]).to_list()
    for case in (keras_harness.KerasTestCase("setUp"), keras_harness.KerasHubTestCase("setUp")):
        case.setUp()
        case.tearDown()
    assert tokenizer.tokenize(["A small package."]).to_list() == before
