"""Settings and results of the training stage (section 5's recipe, resolved from the preset)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from keras_transformer.models.config import TransformerConfig
from keras_transformer.models.presets import TrainingRecipe, get_preset
from pipelines.config import DROPPED, SettingError
from pipelines.distribution import STRATEGY_KINDS
from pipelines.vocabulary import Vocabulary

if TYPE_CHECKING:  # Keras: imported when a model is built, not to read these settings
    from keras_transformer.models.transformer import Transformer

MIXED_PRECISION = ("none", "mixed_float16", "mixed_bfloat16")
DATA_RESUME = ("skip", "replay", "restart")
METRICS_FILE = "metrics.jsonl"
TRAIN_CONFIG_FILE = "train_config.json"
CHECKPOINT_NAME = "ckpt"
DEFAULT_CHECKPOINT_DIR = "runs/train"


class TrainingDivergedError(RuntimeError):
    """The loss or the gradients became NaN or infinite; the update was not applied.

    ``step`` is the optimizer step (1-based) that diverged; ``last_checkpoint`` is the newest
    checkpoint on disk, written before the divergence.
    """

    def __init__(self, step: int, reason: str, last_checkpoint: str | None):
        self.step = step
        self.reason = reason
        self.last_checkpoint = last_checkpoint
        where = (
            f"the last good checkpoint is {last_checkpoint}"
            if last_checkpoint
            else "no checkpoint was written yet"
        )
        super().__init__(
            f"training diverged at step {step}: {reason}. The update was not applied and "
            f"nothing was saved; {where}. Lower the learning rate (learning_rate_scale), "
            "lengthen the warm-up or check the data."
        )


#: Marks a train setting that does not change the trained model (where and how often it is saved,
#: logged or validated): a run resumes across a change of it (:func:`operational_settings`).
OPERATIONAL = {"operational": True}


def operational_settings() -> frozenset[str]:
    """The names of :class:`TrainConfig`'s operational settings."""
    from dataclasses import fields

    return frozenset(f.name for f in fields(TrainConfig) if f.metadata.get("operational"))


@dataclass
class TrainConfig:
    """Settings of the training stage; ``None`` means "the preset's value".

    The time budget (``train_minutes``) counts steps and checkpoint writes, not validation; the seconds
    spent are checkpointed, so a resumed run spends only what is left of the same budget. Equation (3)
    depends on the step alone, so the schedule needs no knowledge of where the budget will end. In a
    pipeline, ``{run_id}`` in ``checkpoint_dir`` stands for the MLflow run id; a ``checkpoint_dir``
    without it is shared by every run, so a rerun after a finished run continues training there.
    """

    #: The preset whose architecture, recipe and decoding are trained (``keras_transformer.preset_names()``).
    preset: str = "demo"
    #: Overrides of the preset's architecture, e.g. ``{num_layers: 1, dropout: 0.0}`` (``train.model``); the
    #: vocabulary sizes come from the tokenizer.
    model: dict[str, Any] = field(default_factory=dict)
    #: Optimizer steps to train; null: the preset's (under a time budget, a cap).
    train_steps: int | None = None
    #: Wall-clock budget of the training loop in minutes: training stops at whichever of ``train_steps`` and this
    #: comes first; null: the preset's, 0: none.
    train_minutes: float | None = None
    #: Under a budget, the checkpoints to average are written evenly over this last fraction of the run, the last at
    #: its end (the paper's last 5 covered the final 7% of its 12 hours).
    average_window: float = 0.1
    #: The rate falls linearly to zero over this last fraction of the run (not in the paper); null: the preset's, 0:
    #: no fall.
    decay_fraction: float | None = None
    #: Warm-up steps of equation (3); null: the preset's.
    warmup_steps: int | None = None
    #: Label smoothing epsilon (section 5.4); null: the preset's.
    label_smoothing: float | None = None
    #: A factor on the rate of equation (3); null: the preset's.
    learning_rate_scale: float | None = None
    #: Target tokens per optimizer step, reached by accumulating batches (a step ends within about half a batch of it,
    #: over all replicas); null: the preset's ``tokens_per_batch``.
    tokens_per_step: int | None = None
    #: A fixed number of batches per replica and step, instead of ``tokens_per_step``.
    accumulation_batches: int | None = None
    #: ``None``: ``runs/train`` for the stage alone; the pipeline flow gives each run its own.
    checkpoint_dir: str | None = field(default=None, metadata=OPERATIONAL)
    #: Save a checkpoint every this many steps (null: not by steps).
    checkpoint_every_steps: int | None = field(default=100, metadata=OPERATIONAL)
    #: Save a checkpoint every this many minutes (the paper: 10; null: not by time).
    checkpoint_every_minutes: float | None = field(default=10.0, metadata=OPERATIONAL)
    #: How many of the newest checkpoints are kept (at least the preset's ``checkpoints_to_average``); null: enough to
    #: average, and 5.
    keep_checkpoints: int | None = field(default=None, metadata=OPERATIONAL)
    #: A resumed run's data: ``skip`` continues the stream exactly where the checkpoint was taken, from the position
    #: saved with it (on one worker; a few MB of buffered examples) or, a checkpoint without one, by replaying the
    #: stream to it; ``replay`` always replays and saves no position; ``restart`` starts the stream over.
    data_resume: str = "skip"
    #: ``auto`` (the machine's devices, or the ``TF_CONFIG`` cluster), ``mirrored``, ``multi_worker`` or
    #: ``one_device``.
    strategy: str = "auto"
    #: The devices to train on, e.g. ``["/gpu:0"]``; null: every device the strategy finds.
    devices: list[str] | None = None
    #: Split the CPU into this many logical devices, mirrored over unless ``devices`` is given (the CLI applies it
    #: before TensorFlow starts).
    cpu_devices: int | None = None
    #: ``none``, ``mixed_float16`` (with dynamic loss scaling) or ``mixed_bfloat16``; logits, softmax and loss stay
    #: float32.
    mixed_precision: str = "none"
    #: XLA for the forward and backward pass (pays with fixed shapes, e.g. on GPUs).
    jit_compile: bool = False
    #: With ``mixed_float16``: the dynamic loss scale's first value.
    initial_loss_scale: float = 2.0**15
    #: With ``mixed_float16``: steps without an overflow before the loss scale grows.
    loss_scale_growth_steps: int = 2000
    #: Seed of the weights' initialisation, dropout and the Python and NumPy generators.
    seed: int = 0
    #: Log the training loss every this many steps.
    log_every: int = field(default=50, metadata=OPERATIONAL)
    #: Show a progress bar (on the chief, on a terminal).
    progress_bar: bool = field(default=True, metadata=OPERATIONAL)
    #: Validate every this many steps, and at the end; null: at the end only.
    validate_every_steps: int | None = field(default=None, metadata=OPERATIONAL)
    #: Validate on at most this many batches; null: the whole validation split.
    validation_max_batches: int | None = field(default=None, metadata=OPERATIONAL)

    #: Settings taken out of the product: a config naming one fails saying so (``pipelines.config``).
    removed_settings: ClassVar[dict[str, str]] = {
        "unlikelihood": DROPPED, "unlikelihood_window": DROPPED,
        "seconds_per_step": "a replay device of recipe-search and the benchmarks, which now replay the runs they make "
                            "(pipelines.training.budget.replaying_steps)"}

    def __post_init__(self) -> None:
        def fail(name: str, why: str) -> None:
            raise SettingError(self, name, why)

        try:
            preset = get_preset(self.preset)
        except ValueError as err:
            raise SettingError(self, "preset", str(err)) from err
        self.model = dict(self.model or {})
        gone = preset.config_class.removed_setting(self.model)
        if gone is not None:
            raise SettingError(self, "model", f"was removed ({gone[1]})", at=gone[0])
        known = preset.config_class.field_names()
        unknown = sorted(set(self.model) - known)
        if unknown:
            fail("model", f"unknown model setting(s) {unknown} for preset '{self.preset}' ({preset.architecture}); "
                 f"known are {sorted(known)}")
        sizes = {} if {"vocab_size", "source_vocab_size", "target_vocab_size"} & set(self.model) else {"vocab_size": 8}
        try:  # the values too, now: the vocabulary sizes come from the tokenizers, hours later
            preset.model_config(**{**self.model, **sizes})
        except (TypeError, ValueError) as err:
            raise SettingError(self, "model", str(err)) from err
        for name in ("train_steps", "warmup_steps", "tokens_per_step", "accumulation_batches",
                     "checkpoint_every_steps", "keep_checkpoints", "cpu_devices",
                     "validate_every_steps", "validation_max_batches", "log_every",
                     "loss_scale_growth_steps"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or value < 1):
                fail(name, "must be a positive integer")
        if self.train_minutes is not None and (isinstance(self.train_minutes, bool) or not isinstance(
                self.train_minutes, (int, float)) or self.train_minutes < 0):
            fail("train_minutes", "must be a number of minutes >= 0 (0: no time budget)")
        if isinstance(self.average_window, bool) or not isinstance(self.average_window, (int, float)) \
                or not 0 < self.average_window <= 1:
            fail("average_window", "must be a fraction of the run in (0, 1]")
        if self.decay_fraction is not None and (isinstance(self.decay_fraction, bool) or not isinstance(
                self.decay_fraction, (int, float)) or not 0 <= self.decay_fraction <= 1):
            fail("decay_fraction", "must be a fraction of the run in [0, 1] (0: no decay to zero)")
        if self.checkpoint_every_minutes is not None and self.checkpoint_every_minutes <= 0:
            fail("checkpoint_every_minutes", "must be positive (or null to disable)")
        if self.label_smoothing is not None and not 0.0 <= self.label_smoothing < 1.0:
            fail("label_smoothing", "must be in [0, 1)")
        if self.learning_rate_scale is not None and self.learning_rate_scale <= 0:
            fail("learning_rate_scale", "must be positive")
        if self.initial_loss_scale < 1:
            fail("initial_loss_scale", "must be >= 1")
        needed = preset.training.checkpoints_to_average
        if self.keep_checkpoints is not None and self.keep_checkpoints < needed:
            fail("keep_checkpoints", f"preset '{self.preset}' averages the last {needed} "
                 "checkpoints (section 6.1), so at least that many must be kept")
        if self.strategy not in STRATEGY_KINDS:
            fail("strategy", f"use one of {STRATEGY_KINDS}")
        if self.mixed_precision not in MIXED_PRECISION:
            fail("mixed_precision", f"use one of {MIXED_PRECISION}")
        if self.data_resume not in DATA_RESUME:
            fail("data_resume", f"use one of {DATA_RESUME}")

    def resolved(self) -> TrainingRecipe:
        """The recipe this run trains with: the preset's, with what this config sets.

        A typed, frozen record (the model keeps it as ``training_recipe``, so a saved model
        compiles with it again); its ``tokens_per_batch`` is the number of target tokens per
        optimizer step (section 5.1's "batch").
        """
        recipe = get_preset(self.preset).training
        minutes = recipe.train_minutes if self.train_minutes is None else self.train_minutes
        chosen = {
            "train_steps": self.train_steps,
            "train_minutes": float(minutes) if minutes else None,
            "decay_fraction": (recipe.decay_fraction if self.decay_fraction is None else self.decay_fraction) or None,
            "warmup_steps": self.warmup_steps,
            "label_smoothing": self.label_smoothing,
            "tokens_per_batch": self.tokens_per_step,
            "learning_rate_scale": self.learning_rate_scale,
        }
        return replace(recipe, **{k: v for k, v in chosen.items()
                                  if v is not None or k in ("train_minutes", "decay_fraction")})

    def model_config(self, vocab_sizes: Vocabulary[int]) -> TransformerConfig:
        """The preset's architecture with ``model``'s settings and the vocabulary size(s)."""
        sizes = ({"vocab_size": vocab_sizes.source} if vocab_sizes.shared
                 else {"source_vocab_size": vocab_sizes.source, "target_vocab_size": vocab_sizes.target})
        return get_preset(self.preset).model_config(**{**self.model, **sizes})

    def checkpoints_kept(self) -> int:
        """How many checkpoints the run keeps: ``keep_checkpoints``, else enough to average (and 5)."""
        return self.keep_checkpoints or max(get_preset(self.preset).training.checkpoints_to_average, 5)


@dataclass
class TrainResult:
    """What :func:`train` returns. On a non-chief worker ``history`` and ``checkpoints`` are
    empty and ``validation`` is ``None``: the chief alone writes and validates."""

    final_step: int
    start_step: int
    optimizer_steps: int
    checkpoint_dir: Path
    checkpoints: list[str]
    history: list[dict[str, Any]]
    validation: dict[str, float] | None
    model: Transformer = field(repr=False)
    elapsed_seconds: float = 0.0
    #: Seconds of the training loop over all runs of this directory (what a budget counts).
    train_seconds: float = 0.0
    #: How it trained: ``strategy`` (its kind), ``replicas``, ``workers`` and ``precision``
    #: (``float32`` or the mixed policy), as a run records them.
    distribution: dict[str, Any] = field(default_factory=dict)

    @property
    def latest_checkpoint(self) -> str | None:
        return self.checkpoints[-1] if self.checkpoints else None
