"""Presets: every configuration of the paper's Table 3, the big model, the parser, CPU presets.

The presets themselves are data (``presets.yaml`` beside this file); this module only loads them
into typed objects. Each preset carries the architecture (``model``), the training recipe of
section 5 (``training``) and the inference settings of section 6.1 (``decoding``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml

from keras_transformer.decoding.settings import DecodingSettings
from keras_transformer.models.config import TransformerConfig, config_class


@dataclass(frozen=True)
class TrainingRecipe:
    """Section 5: optimiser, schedule, regularisation and batch size of a preset."""

    #: Label smoothing epsilon (section 5.4: 0.1).
    label_smoothing: float = 0.1
    #: Warm-up steps of equation (3) (section 5.3: 4000).
    warmup_steps: int = 4000
    #: Optimizer steps (section 5.2: base 100k, big 300k); under ``train_minutes`` a cap.
    train_steps: int = 100000
    #: Target tokens per optimizer step (section 5.1: ~25000).
    tokens_per_batch: int = 25000
    #: Adam's beta_1 (section 5.3: 0.9).
    adam_beta_1: float = 0.9
    #: Adam's beta_2 (section 5.3: 0.98).
    adam_beta_2: float = 0.98
    #: Adam's epsilon (section 5.3: 1e-9).
    adam_epsilon: float = 1e-9
    #: Multiplies the schedule of equation (3); 1.0 is the paper's.
    learning_rate_scale: float = 1.0
    #: Wall-clock budget of training in minutes (``None``: none); training stops at whichever
    #: of ``train_steps`` and ``train_minutes`` comes first.
    train_minutes: float | None = None
    #: The rate falls linearly to zero over this last fraction of the run (``None``: equation
    #: (3) alone, as in the paper).
    decay_fraction: float | None = None
    #: Section 6.1: the model evaluated is the average of the last N checkpoints (base 5, big 20).
    checkpoints_to_average: int = 5

    def optimizer(self, d_model: int, decay_fraction: float | None = None):
        """Section 5.3's Adam on equation (3) with this recipe's betas, epsilon, warm-up and scale.

        ``decay_fraction`` adds the fall to zero over the run's tail (``LinearDecayTail``), whose
        progress the training stage sets; ``compile()`` leaves it out: ``fit`` does not know
        where a run ends.
        """
        from keras_transformer.training.schedules import transformer_adam  # Keras, imported when one is built

        return transformer_adam(d_model, self.warmup_steps, self.adam_beta_1, self.adam_beta_2, self.adam_epsilon,
                                scale=self.learning_rate_scale, decay_fraction=decay_fraction)


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    model: dict[str, Any]
    training: TrainingRecipe = field(default_factory=TrainingRecipe)
    decoding: DecodingSettings = field(default_factory=DecodingSettings)
    paper_params_millions: float | None = None
    #: Which model the settings build (``keras_transformer.models.config.ARCHITECTURES``).
    architecture: str = "transformer"

    @property
    def config_class(self):
        """:class:`TransformerConfig` or the config class of the preset's ``architecture``."""
        return config_class(self.architecture)

    def model_config(self, **overrides) -> TransformerConfig:
        """The preset's architecture with ``overrides`` (e.g. ``vocab_size``) applied; a setting
        taken out of the product fails saying so."""
        settings = {**self.model, **overrides}
        gone = self.config_class.removed_setting(settings)
        if gone is not None:
            key, why = gone
            raise ValueError(f"preset '{self.name}': model setting `{key}`={settings[key]!r} was removed ({why})")
        names = self.config_class.field_names()
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise ValueError(
                f"Unknown model setting(s) {unknown} for preset '{self.name}'; "
                f"known settings are {sorted(names)}"
            )
        return self.config_class(**settings)


def _merge(base: dict, override: dict) -> dict:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@functools.lru_cache(maxsize=1)
def _raw_presets() -> dict[str, dict]:
    text = resources.files("keras_transformer.models").joinpath("presets.yaml").read_text("utf-8")
    raw = yaml.safe_load(text)
    base = raw["base"]
    presets = {}
    for name, spec in raw.items():
        merged = spec if name == "base" else _merge(base, spec)
        if spec.get("architecture", "transformer") != "transformer":
            # Another model: base's recipe and decoding are a start, its Transformer settings are not.
            merged["model"] = dict(spec.get("model", {}))
        presets[name] = merged
    return presets


def preset_names() -> list[str]:
    return list(_raw_presets())


def get_preset(name: str) -> Preset:
    """The preset called ``name``; a ``ValueError`` lists the known names otherwise."""
    presets = _raw_presets()
    if name not in presets:
        raise ValueError(f"Unknown preset '{name}'. Known presets: {', '.join(presets)}")
    spec = presets[name]
    return Preset(
        name=name,
        description=spec.get("description", ""),
        model=dict(spec["model"]),
        training=TrainingRecipe(**spec.get("training", {})),
        decoding=DecodingSettings.from_dict(spec.get("decoding", {})),
        paper_params_millions=spec.get("paper_params_millions"),
        architecture=spec.get("architecture", "transformer"),
    )

