"""``Transformer`` and ``SpanParser`` through keras-hub's model harness, and where mixed precision reaches.

keras-hub's ``run_backbone_test`` (serialization, eager and variable-length calls, the token
embedding, compiled ``predict`` on arrays and a ``tf.data`` dataset, the name, quantization),
``run_serialization_test`` and ``run_model_saving_test``, on tiny configurations and on the small
presets (``demo``, ``cpu-small``, ``span-parser-cpu``) at a small vocabulary.

One check is adapted, the same way for both models: keras-hub's ``run_precision_test`` wants every
float output in the policy's compute dtype, a backbone's hidden states; these models return
logits, which the paper's numerics keep in float32 under mixed precision (softmax and loss run in
float32). ``_run_precision_test`` below is keras-hub's test with that one assertion turned into the
stricter one that the outputs are float32; its sublayer and weight assertions are unchanged.
"""

from __future__ import annotations

import keras
import numpy as np
from absl.testing import parameterized
from keras_hub.src.utils.tensor_utils import is_float_dtype

from keras_transformer.layers.attention import MultiHeadAttention
from keras_transformer.models.span_parser.model import SpanParser
from keras_transformer.models.transformer import Transformer
from tests.keras_transformer import keras_harness

VOCAB = 24
RNG = np.random.default_rng(0)
# Ids 4.. are real tokens (pad 0, unk 1, BOS 2, EOS 3); the second sentence is padded.
SOURCE = np.array([[5, 9, 12, 3, 0], [7, 11, 3, 0, 0]], "int32")
TARGET = np.array([[2, 6, 8, 10], [2, 13, 0, 0]], "int32")
TRANSFORMER_INPUTS = {"source_ids": SOURCE, "target_ids": TARGET}
# Named: a subclassed model's sublayers' paths begin with its name, and keras-hub's quantization
# check keys its DTypePolicyMap by the paths of a first instance (Keras numbers unnamed ones).
TINY = dict(vocab_size=VOCAB, num_layers=1, d_model=8, num_heads=2, d_ff=16, dropout=0.1, name="transformer")
# The paper's model, and every optional part at once (two variants keep the harness fast).
TRANSFORMER_VARIANTS = {
    "post_norm": {},
    "pre_norm_learned_positions_separate_vocabularies_word_alignment": {
        "norm_first": True, "positional_encoding": "learned", "max_length": 16,
        "share_embeddings": False, "tie_output_embeddings": False, "source_vocab_size": VOCAB,
        "target_vocab_size": VOCAB + 3, "vocab_size": None,
        "word_alignment": True, "word_start_ids": list(range(4, 16)), "slot_ids": list(range(4, 10)),
        "tagger": "fused", "word_pieces": "mean"},
}
# Even ids from 4 begin a word, odd ones continue it.
WORD_STARTS = list(range(4, VOCAB, 2))
PIECES = ["<pad>", "<unk>", "<s>", "</s>"] + [f"\u2581w{i}" if i % 2 == 0 else f"x{i}" for i in range(4, VOCAB)]
PARSER = dict(source_vocab_size=VOCAB, labels=["", "NP", "VP", "S+VP"], tags=["DT", "NN", "VB"],
              word_start_ids=WORD_STARTS)
TINY_PARSER = dict(**PARSER, num_layers=1, d_model=8, num_heads=2, d_ff=16, dropout=0.1, span_hidden=8,
                   name="span_parser")
PARSER_VARIANTS = {
    "encoder": {},
    "pre_norm_word_lstm_characters": {"norm_first": True, "word_lstm": 1, "char_dim": 4, "source_pieces": PIECES,
                                      "piece_dropout": 0.1, "word_pieces": "mean"},
}
PARSER_SOURCE = np.array([[4, 6, 7, 8, 3], [10, 11, 3, 0, 0]], "int32")
MIXED = ("mixed_float16", "mixed_bfloat16")
# Sublayers that compute in float32 under a mixed policy, by design, each named with its reason.
# None: the paper's float32 numerics (logits, softmax, loss) are casts inside call(), not layers,
# and every layer of both models computes in the compute dtype (the walk below checks this).
FLOAT32_BY_DESIGN: dict[str, str] = {}


def _kwargs(variant):
    return {k: v for k, v in {**TINY, **TRANSFORMER_VARIANTS[variant]}.items() if v is not None}


def _preset(name):
    """A small preset at the test vocabulary, as ``from_preset`` builds it."""
    if name == "span-parser-cpu":
        return SpanParser.from_preset(name, **PARSER, source_pieces=PIECES)
    return Transformer.from_preset(name, vocab_size=VOCAB)


class ModelHarness(keras_harness.KerasHubTestCase):
    def _run_precision_test(self, cls, init_kwargs, input_data, policies=("mixed_float16", "mixed_bfloat16",
                                                                          "bfloat16")):
        """keras-hub's ``run_precision_test`` with float32 outputs (module docstring)."""
        for name in policies:
            policy = keras.mixed_precision.Policy(name)
            model = cls(**{**init_kwargs, "dtype": policy})
            outputs = model(input_data)
            spec = model.compute_output_spec(input_data)
            for tensor in keras.tree.flatten(outputs) + keras.tree.flatten(spec):
                if is_float_dtype(tensor.dtype):
                    self.assertDTypeEqual(tensor, "float32")
            for weight in model.weights:
                if is_float_dtype(weight.dtype):
                    self.assertDTypeEqual(weight, policy.variable_dtype)
            for sublayer in model._flatten_layers():
                if isinstance(sublayer, (keras.layers.Softmax, keras.layers.InputLayer)):
                    continue
                self.assertEqual(policy.compute_dtype, sublayer.compute_dtype, msg=sublayer.path)
                self.assertEqual(policy.variable_dtype, sublayer.variable_dtype, msg=sublayer.path)


class TransformerHarness(ModelHarness):
    @parameterized.named_parameters(*((v, v) for v in TRANSFORMER_VARIANTS))
    def test_backbone(self, variant):
        kwargs = _kwargs(variant)
        target_vocab = kwargs.get("target_vocab_size", VOCAB)
        self.run_backbone_test(
            cls=Transformer,
            init_kwargs=kwargs,
            input_data=TRANSFORMER_INPUTS,
            expected_output_shape=(2, 4, target_vocab),
            # Adapted: the logits are float32 under mixed precision (module docstring).
            run_mixed_precision_check=False,
        )
        self._run_precision_test(Transformer, kwargs, TRANSFORMER_INPUTS)

    @parameterized.named_parameters(*((v, v) for v in TRANSFORMER_VARIANTS))
    def test_model_saving(self, variant):
        self.run_model_saving_test(cls=Transformer, init_kwargs=_kwargs(variant), input_data=TRANSFORMER_INPUTS)

    @parameterized.named_parameters(("demo", "demo"), ("cpu_small", "cpu-small"))
    def test_presets(self, name):
        model = _preset(name)
        self.run_serialization_test(model)
        self.run_model_saving_test(cls=Transformer, init_kwargs=model.get_config(), input_data=TRANSFORMER_INPUTS)

    def test_a_revived_model_is_the_constructed_one(self):
        model = _preset("demo")
        revived = Transformer.from_config(model.get_config())
        self.assertEqual(model.decoding, revived.decoding)
        self.assertEqual(model.decoding_saved, revived.decoding_saved)
        self.assertEqual(model.training_recipe, revived.training_recipe)
        self.assertEqual(model.config, revived.config)


class SpanParserHarness(ModelHarness):
    @parameterized.named_parameters(*((v, v) for v in PARSER_VARIANTS))
    def test_backbone(self, variant):
        kwargs = {**TINY_PARSER, **PARSER_VARIANTS[variant]}
        self.run_backbone_test(
            cls=SpanParser,
            init_kwargs=kwargs,
            input_data=PARSER_SOURCE,
            # Three words in the first sentence: fenceposts 0..3, labels; tags per word.
            expected_output_shape={"spans": (2, 4, 4, 4), "tags": (2, 3, 3)},
            # Adapted: the span and tag logits are float32 under mixed precision (module docstring).
            run_mixed_precision_check=False,
        )
        # Adapted for word_lstm: no bfloat16 variables (the full "bfloat16" policy, not the mixed
        # ones), because Keras's LSTM initialises its recurrent kernel orthogonally with TensorFlow's
        # QR, which has no bfloat16 kernel ("Value for attr 'T' of bfloat16 is not in the list").
        policies = MIXED if kwargs.get("word_lstm") else MIXED + ("bfloat16",)
        self._run_precision_test(SpanParser, kwargs, PARSER_SOURCE, policies)

    @parameterized.named_parameters(*((v, v) for v in PARSER_VARIANTS))
    def test_model_saving(self, variant):
        self.run_model_saving_test(cls=SpanParser, init_kwargs={**TINY_PARSER, **PARSER_VARIANTS[variant]},
                                   input_data=PARSER_SOURCE)

    def test_preset(self):
        model = _preset("span-parser-cpu")
        self.run_serialization_test(model)
        self.run_model_saving_test(cls=SpanParser, init_kwargs=model.get_config(), input_data=PARSER_SOURCE)


class MixedPrecisionWalk(keras_harness.KerasHubTestCase):
    """Every sublayer of both models, built from their presets with a mixed policy, computes in
    the policy's compute dtype; only ``FLOAT32_BY_DESIGN`` may compute in float32."""

    def _walk(self, model, policy):
        float32 = {}
        for sublayer in model._flatten_layers(include_self=True):
            if sublayer.compute_dtype == "float32":
                float32[sublayer.path] = type(sublayer).__name__
            self.assertEqual(sublayer.variable_dtype, "float32", msg=sublayer.path)
        self.assertEqual(set(float32), set(FLOAT32_BY_DESIGN), msg=f"float32 sublayers under {policy}: {float32}")
        self.assertGreater(len(list(model._flatten_layers())), 20)

    @parameterized.named_parameters(*((p, p) for p in MIXED))
    def test_transformer(self, policy):
        # The demo preset with every optional part: word alignment and its tagger, separate output weights.
        model = Transformer.from_preset("demo", vocab_size=VOCAB, word_alignment=True, word_start_ids=WORD_STARTS,
                                        slot_ids=list(range(4, 10)), tagger="fused", tie_output_embeddings=False,
                                        dtype=policy)
        self._walk(model, policy)
        self.assertDTypeEqual(model(TRANSFORMER_INPUTS), "float32")   # the logits

    @parameterized.named_parameters(*((p, p) for p in MIXED))
    def test_span_parser(self, policy):
        model = SpanParser.from_preset("span-parser-cpu", **PARSER, source_pieces=PIECES, word_lstm=1, dtype=policy)
        self._walk(model, policy)
        outputs = model(PARSER_SOURCE)
        for name in ("spans", "tags"):   # the logits, which the tree CRF and the tag loss read
            self.assertDTypeEqual(outputs[name], "float32")
        self.assertTrue(np.isfinite(np.asarray(outputs["spans"])).all())


class SymbolicMixedPrecision(keras_harness.KerasHubTestCase):
    """The residual layers inside functional models under mixed precision (a symbolic call)."""

    @parameterized.named_parameters(*((p, p) for p in MIXED))
    def test_encoder_layer_in_a_functional_model(self, policy):
        from keras_transformer.layers.encoder import TransformerEncoderLayer

        for norm_first in (False, True):
            inputs = keras.Input((None, 8))
            outputs = TransformerEncoderLayer(num_heads=2, d_ff=16, norm_first=norm_first, dtype=policy)(inputs)
            self.assertEqual(outputs.dtype, keras.mixed_precision.Policy(policy).compute_dtype)
            model = keras.Model(inputs, outputs)
            self.assertEqual(tuple(model(RNG.uniform(size=(2, 3, 8)).astype("float32")).shape), (2, 3, 8))

    def test_attention_in_a_functional_model(self):
        query, value = keras.Input((None, 8)), keras.Input((None, 8))
        outputs = MultiHeadAttention(2, 4, dtype="mixed_float16")(query, value)
        self.assertEqual((outputs.shape, outputs.dtype), ((None, None, 8), "float16"))
