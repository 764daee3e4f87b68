"""The training stage trains the architecture its preset names: the span parser through the same
runner, checkpoints and averaging as the Transformer, on the flow's batches of linearised trees."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.checkpoints.averaging import average_checkpoints
from keras_transformer.checkpoints.model_checkpoint import MODEL_CONFIG_FILE, load_model_from_checkpoint
from keras_transformer.models.span_parser import SpanParser
from pipelines.config import ConfigError
from pipelines.training import TrainConfig, train
from pipelines.vocabulary import Vocabulary
from tests.keras_transformer.models.span_parser.test_targets import CHAINS, PIECES, TAGS, target_batch
from tests.keras_transformer.training.test_objectives import SOURCE_VOCAB, WORD_STARTS, source_batch
from tests.pipelines.tasks.parsing.test_chart import SMALL, UNARY

# The preset spells words (char_dim): the pieces' strings are what the training stage would read
# off the source tokenizer.
SOURCE_PIECES = ["<pad>", "<unk>", "<s>", "</s>"] + [f"\u2581w{i}" if i in WORD_STARTS else f"x{i}"
                                                     for i in range(4, SOURCE_VOCAB)]
SPAN = {"num_layers": 1, "d_model": 16, "num_heads": 2, "d_ff": 32, "span_hidden": 16, "dropout": 0.0,
        "piece_dropout": 0.0, "char_dim": 4, "labels": CHAINS, "tags": TAGS, "word_start_ids": WORD_STARTS,
        "source_pieces": SOURCE_PIECES}


def _batches():
    trees = [SMALL, UNARY]
    target_out = tf.constant(target_batch(trees))
    return tf.data.Dataset.from_tensors(((source_batch(trees), target_out), target_out)).repeat()


def test_a_span_parser_trains_checkpoints_and_averages_as_a_transformer_does(tmp_path):
    # A batch a step: the batches are the same two trees, and the preset's 500 words a step would repeat them 70 times.
    config = TrainConfig(preset="span-parser-cpu", model=SPAN, train_minutes=0, train_steps=60, warmup_steps=10,
                         accumulation_batches=1,
                         learning_rate_scale=0.5, checkpoint_dir=str(tmp_path / "train"), checkpoint_every_steps=10,
                         progress_bar=False)
    result = train(config, _batches(), Vocabulary(SOURCE_VOCAB, len(PIECES)), validation_data=_batches().take(1),
                   target_pieces=PIECES)
    assert isinstance(result.model, SpanParser) and result.final_step == 60
    losses = [record["loss"] for record in result.history]
    assert losses[-1] < 0.3 * losses[0]
    # Validation reports the objective per word and the tagging accuracy: the two trees are learnt.
    assert result.validation["token_accuracy"] == 1.0
    assert result.validation["tokens"] == len(SMALL.words()) + len(UNARY.words())

    info = json.loads((tmp_path / "train" / MODEL_CONFIG_FILE).read_text())
    assert info["architecture"] == "span_parser" and info["model_class"] == "keras_transformer.SpanParser"
    assert info["config"]["labels"] == CHAINS
    restored = load_model_from_checkpoint(result.latest_checkpoint)
    assert isinstance(restored, SpanParser)
    source = source_batch([SMALL])
    np.testing.assert_allclose(restored(source)["spans"], result.model(source)["spans"], atol=1e-5)

    averaged = average_checkpoints(tmp_path / "train", last_n=2, output=tmp_path / "averaged")
    model = keras.saving.load_model(averaged.keras_model, compile=False)
    assert isinstance(model, SpanParser) and model.labels == CHAINS and model.tags == TAGS


def test_a_setting_of_another_architecture_names_the_preset():
    with pytest.raises(ConfigError, match=r"\['tagger'\] for preset 'span-parser-cpu' \(span_parser\)"):
        TrainConfig(preset="span-parser-cpu", model={"tagger": "fused"})
    with pytest.raises(ConfigError, match="span_hidden"):
        TrainConfig(preset="parser-cpu", model={"span_hidden": 64})
