"""``compile()`` with the paper's recipe (5.3, 5.4) for every argument left at "auto"."""

import keras
import numpy as np
import pytest

import keras_transformer as kt
from keras_transformer import LabelSmoothedCrossEntropy, MaskedAccuracy, Perplexity


def test_compile_takes_the_presets_learning_rate_scale():
    # The peak, at the last warm-up step (0-based iteration warmup - 1).
    paper = kt.Transformer.from_preset("base", vocab_size=100, num_layers=1)
    paper.compile()
    assert float(paper.optimizer._learning_rate(3999)) == pytest.approx(512**-0.5 * 4000**-0.5)
    small = kt.Transformer.from_preset("cpu-small", vocab_size=100)
    small.compile()
    recipe = kt.get_preset("cpu-small").training
    peak = recipe.warmup_steps - 1
    assert float(small.optimizer._learning_rate(peak)) == pytest.approx(
        recipe.learning_rate_scale * 256**-0.5 * recipe.warmup_steps**-0.5)
    small.compile(learning_rate_scale=1.0)
    assert float(small.optimizer._learning_rate(peak)) == pytest.approx(256**-0.5 * recipe.warmup_steps**-0.5)


def test_auto_means_the_recipe_s_loss_and_metrics_and_given_ones_are_kept():
    model = kt.Transformer.from_preset("demo", vocab_size=50, num_layers=1)
    model.compile()
    assert isinstance(model.loss, LabelSmoothedCrossEntropy)
    assert model.loss.get_config()["label_smoothing"] == pytest.approx(model.training_recipe.label_smoothing)
    source = np.arange(1, 11, dtype="int32").reshape(2, 5)
    scores = model.evaluate((source, source), source, verbose=0, return_dict=True)
    assert set(scores) == {"loss", MaskedAccuracy(0).name, Perplexity(0).name}
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=[], label_smoothing=0.3)
    assert isinstance(model.optimizer, keras.optimizers.SGD) and model.loss == "sparse_categorical_crossentropy"


def test_a_compiled_model_reloads_compiled_with_its_optimizer_state(tmp_path):
    model = kt.Transformer.from_preset("demo", vocab_size=50, num_layers=1)
    model.compile()
    source = np.arange(1, 11, dtype="int32").reshape(2, 5) % 50
    model.fit((source, source), source, epochs=1, verbose=0)
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    assert int(loaded.optimizer.iterations) == int(model.optimizer.iterations) == 1
    assert float(loaded.optimizer.learning_rate) == pytest.approx(float(model.optimizer.learning_rate))
