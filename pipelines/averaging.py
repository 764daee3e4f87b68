"""Checkpoint-averaging stage: the last N checkpoints of a training run into one model.

Section 6.1: "we used a single model obtained by averaging the last 5 checkpoints" (base) and
"the last 20 checkpoints" (big). The work is done by
:func:`keras_transformer.checkpoints.averaging.average_checkpoints`; this stage only reads its
settings from YAML and takes N from the run's preset when it is not given.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from keras_transformer.models.presets import get_preset
from pipelines.config import ConfigError, SettingError, load_config

if TYPE_CHECKING:  # TensorFlow: imported when a run averages, not to read these settings
    from keras_transformer.checkpoints.averaging import AveragingResult

logger = logging.getLogger(__name__)


@dataclass
class AveragingConfig:
    """Settings of the checkpoint averaging stage (section 6.1: the model evaluated averages the last checkpoints)."""

    #: The training directory whose checkpoints are averaged (the pipeline sets it to the run's).
    checkpoint_dir: str = "runs/train"
    #: Where the averaged checkpoint, ``model_config.json`` and ``model.keras`` go (not inside ``checkpoint_dir``).
    output_dir: str = "runs/averaged"
    #: How many of the newest checkpoints; null: the preset's ``checkpoints_to_average``.
    last_n: int | None = None

    #: Settings taken out of the product: a config naming one fails saying so (``pipelines.config``).
    removed_settings: ClassVar[dict[str, str]] = {
        "save_keras": "the averaged model is always saved as model.keras, which the stages after it load"}

    def __post_init__(self) -> None:
        if self.last_n is not None and (not isinstance(self.last_n, int) or self.last_n < 1):
            raise SettingError(self, "last_n", "must be a positive integer")


def checkpoints_to_average(config: AveragingConfig) -> int:
    """``config.last_n``, or the run's preset's number (5 for base, 20 for big)."""
    if config.last_n is not None:
        return config.last_n
    from keras_transformer.checkpoints.model_checkpoint import read_model_config

    info = read_model_config(config.checkpoint_dir)
    if info is None or not info.get("preset"):
        raise ConfigError(
            f"{config.checkpoint_dir} records no preset (model_config.json); set last_n")
    return get_preset(info["preset"]).training.checkpoints_to_average


def run_averaging(config: AveragingConfig) -> AveragingResult:
    """Averages the newest checkpoints of ``config.checkpoint_dir`` into ``config.output_dir``."""
    from keras_transformer.checkpoints.averaging import average_checkpoints

    last_n = checkpoints_to_average(config)
    logger.info("averaging the last %d checkpoints of %s into %s", last_n,
                config.checkpoint_dir, config.output_dir)
    return average_checkpoints(config.checkpoint_dir, last_n, config.output_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.averaging",
                                     description="Average the last N training checkpoints.")
    parser.add_argument("--config", required=True,
                        help="YAML file with an 'averaging:' section (AveragingConfig)")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    result = run_averaging(load_config(AveragingConfig, args.config, section="averaging"))
    logger.info("averaged %d checkpoints into %s", len(result.sources), result.checkpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
