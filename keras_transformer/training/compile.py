"""``compile()`` with the paper's training recipe (sections 5.3 and 5.4) for every argument left at "auto"."""

from __future__ import annotations

import dataclasses

import keras

from keras_transformer.training.losses import LabelSmoothedCrossEntropy
from keras_transformer.training.metrics import MaskedAccuracy, Perplexity


class RecipeCompile:
    """A ``keras.Model`` mixin for models that hold a ``training_recipe`` (a
    :class:`~keras_transformer.models.presets.TrainingRecipe`) and a ``config`` with ``d_model`` and
    ``pad_id``: ``model.compile()`` alone sets up the paper's optimizer, loss and metrics."""

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        metrics="auto",
        *,
        label_smoothing=None,
        warmup_steps=None,
        learning_rate_scale=None,
        **kwargs,
    ):
        """``keras.Model.compile`` with the paper's recipe for every argument left at "auto".

        optimizer: Adam(0.9, 0.98, 1e-9) on the warm-up schedule (5.3); loss: label-smoothed
        cross-entropy over non-padding tokens (5.4); metrics: token accuracy and perplexity.
        ``label_smoothing``, ``warmup_steps`` and ``learning_rate_scale`` (a factor on the
        schedule) default to the preset's recipe. The recipe's time budget and its decay of the
        rate to zero belong to the training stage (``pipelines.training``), which knows how far a
        run is; ``fit`` gets equation (3) alone.
        """
        given = {"label_smoothing": label_smoothing, "warmup_steps": warmup_steps,
                 "learning_rate_scale": learning_rate_scale}
        recipe = dataclasses.replace(self.training_recipe, **{k: v for k, v in given.items() if v is not None})
        if optimizer == "auto":
            optimizer = recipe.optimizer(self.config.d_model)
        if loss == "auto":
            loss = LabelSmoothedCrossEntropy(recipe.label_smoothing, pad_id=self.config.pad_id)
        if metrics == "auto":
            metrics = [MaskedAccuracy(self.config.pad_id), Perplexity(self.config.pad_id)]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def compile_from_config(self, config):
        # The stored config holds the concrete optimizer, loss and metrics that compile()
        # resolved, so the overridden compile() can take them back as they are.
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if self.built:
            self.optimizer.build(self.trainable_variables)
