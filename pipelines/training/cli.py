"""``python -m pipelines.training --config job.yaml``: the stage on a prepared corpus."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.config import ConfigError, from_dict, load_config
from pipelines.training.config import TrainConfig, TrainingDivergedError, TrainResult
from pipelines.training.strategy import build_configured_strategy
from pipelines.vocabulary import Vocabulary

logger = logging.getLogger(__name__)


@dataclass
class TrainDataConfig:
    """Where the CLI gets its batches: a prepared corpus, its tokenizer(s), input settings.

    ``tokenizer`` is the SentencePiece model (or ``[source, target]`` models);
    ``input`` holds ``pipelines.input_pipeline.InputConfig`` settings.
    """

    corpus_dir: str = ""
    tokenizer: str | list[str] = ""
    input: dict[str, Any] = field(default_factory=dict)
    validation_split: str | None = "validation"
    verify_corpus: bool = True

    def __post_init__(self) -> None:
        if not self.corpus_dir:
            raise ConfigError("TrainDataConfig.corpus_dir: required")
        if not self.tokenizer:
            raise ConfigError("TrainDataConfig.tokenizer: required (a SentencePiece .model)")
        try:
            self.tokenizer_models()
        except ValueError as err:
            raise ConfigError(f"TrainDataConfig.tokenizer: {err}") from err

    def tokenizer_models(self) -> Vocabulary[str]:
        return Vocabulary.of([self.tokenizer] if isinstance(self.tokenizer, str) else self.tokenizer)


@dataclass
class TrainingJobConfig:
    """The CLI's YAML file: ``train:`` and ``data:`` sections."""

    train: TrainConfig = field(default_factory=TrainConfig)
    data: TrainDataConfig | None = None


def run_from_config(
    path: str | Path,
    *,
    on_step: Callable[[int, dict[str, Any]], None] | None = None,
    overrides: dict[str, Any] | None = None,
) -> TrainResult:
    """Runs the job of a YAML file (``train:`` + ``data:``), as the CLI does.

    ``overrides`` replace ``train:`` settings (e.g. ``{"train_steps": 10}``).
    """
    job = load_config(TrainingJobConfig, path)
    config = job.train
    if overrides:
        config = from_dict(TrainConfig, {**dataclasses.asdict(config), **overrides},
                           source=f"{path} + overrides")
    if job.data is None:
        raise ConfigError(f"{path}: the CLI needs a 'data:' section (corpus_dir, tokenizer)")
    # Device layout and collective ops are fixed by TensorFlow's first operation: before any
    # dataset or tensor exists.
    strategy = build_configured_strategy(config)

    from pipelines.corpus import Corpus
    from pipelines.input_pipeline import InputConfig
    from pipelines.tokenization import load_tokenizers
    from pipelines.training.stage import train_on_corpus

    data = job.data
    corpus = Corpus.load(data.corpus_dir, verify=data.verify_corpus)
    input_config = from_dict(InputConfig, data.input, source=f"{path}:data.input")
    return train_on_corpus(corpus, load_tokenizers(data.tokenizer_models()), input_config, config,
                           validation_split=data.validation_split, strategy=strategy, on_step=on_step)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.training",
        description="Train a Transformer (resumes from the newest checkpoint of checkpoint_dir).")
    parser.add_argument("--config", required=True,
                        help="YAML file with 'train:' (TrainConfig) and 'data:' sections")
    parser.add_argument("--train-steps", type=int, help="override train.train_steps")
    parser.add_argument("--checkpoint-dir", help="override train.checkpoint_dir")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = {}
    if args.train_steps is not None:
        overrides["train_steps"] = args.train_steps
    if args.checkpoint_dir is not None:
        overrides["checkpoint_dir"] = args.checkpoint_dir
    try:
        result = run_from_config(args.config, overrides=overrides)
    except TrainingDivergedError as err:
        logger.error("%s", err)
        return 3
    except ConfigError as err:
        logger.error("%s", err)
        return 2
    logger.info("training finished at step %d (%d optimizer steps); checkpoints: %s; "
                "validation: %s", result.final_step, result.optimizer_steps,
                result.checkpoints, result.validation)
    return 0


if __name__ == "__main__":
    sys.exit(main())
