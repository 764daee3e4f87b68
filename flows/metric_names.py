"""The names a run's numbers get in MLflow: ``<section>/<name>``, the sections its UI shows them in.

MLflow's UI groups a run's charts, and the metric columns of its runs table, by the part of a
metric's name before the ``/``: ``train/`` holds the per-step training curves (loss, token accuracy,
learning rate, tokens per second), ``val/`` the held-out curves, ``test/`` and ``test_unseen/`` the
evaluation's scores on each split, ``export_test/`` and ``export_test_unseen/`` the scores of an export
that decodes on another engine. Counts that describe a run rather than measure it (the model's
parameters, the batches summed into a step, the validation's tokens, the step itself) are its params
and tags instead, where a chart of one dot would tell nothing.

The pipelines' own records (``metrics.jsonl``, ``scores.json``, ``TaskEvaluation.metrics``) keep their
keys; only what goes to MLflow is named here.
"""

from __future__ import annotations

from typing import Any

from pipelines.corpus import EXTRA_SPLITS, SPLITS

TRAIN = "train"
VALIDATION = "val"
#: The training loss curve, whose logged steps say what a resumed run has logged already.
TRAIN_LOSS = f"{TRAIN}/loss"
#: A training step's counts, as the run's tags: constant through a run, a chart would be a flat line.
COUNT_TAGS = {"batches": "training.batches_per_step", "val_tokens": "validation.tokens"}
#: The model's size, a param of the run (and so of its logged model, whose table compares params).
PARAMETERS = "model.parameters"
#: What a task's calibration chose for the model's decoding (a span parser's bias), a param: a setting used.
CALIBRATED_BIAS = "calibration.decoding_bias"


def training_step(record: dict[str, Any]) -> tuple[dict[str, float], dict[str, str]]:
    """A training step's record (:mod:`pipelines.training.trainer`; ``val_*`` where it validated) as
    ``(metrics, tags)``: ``train/loss``, ``val/perplexity``, ...; the counts as :data:`COUNT_TAGS`."""
    metrics: dict[str, float] = {}
    tags: dict[str, str] = {}
    for key, value in record.items():
        if key == "step":
            continue
        if key in COUNT_TAGS:
            tags[COUNT_TAGS[key]] = str(value)
        elif key.startswith("val_"):
            metrics[f"{VALIDATION}/{key[len('val_'):]}"] = value
        else:
            metrics[f"{TRAIN}/{key}"] = value
    return metrics, tags


def training_summary(validation: dict[str, float], train_minutes: float) -> tuple[dict[str, float], dict[str, str]]:
    """What a run records at its final step, as ``(metrics, tags)``: the final validation (the
    ``val/`` curves' last points) and the training loop's minutes; the validation's tokens a tag."""
    metrics, tags = training_step({f"val_{key}": value for key, value in validation.items()})
    return {**metrics, f"{TRAIN}/minutes": train_minutes}, tags


def split_and_name(key: str, split: str) -> tuple[str, str]:
    """The split evaluation metric ``key`` was scored on and its name there: ``("test", "bleu")`` for
    ``bleu`` of an evaluation of ``test``, ``("test_unseen", "bleu")`` for ``test_unseen_bleu``."""
    others = sorted((s for s in (*SPLITS, *EXTRA_SPLITS) if s != split), key=len, reverse=True)
    other = next((s for s in others if key.startswith(f"{s}_")), None)  # test_unseen before test
    return (other, key[len(other) + 1:]) if other else (split, key)


def evaluation(metrics: dict[str, float], split: str, prefix: str = "") -> dict[str, float]:
    """An evaluation's metrics (``TaskEvaluation.metrics`` of ``split``) by their MLflow names:
    ``test/bleu``, ``test_unseen/chrf``; ``prefix`` before the split (``export_``)."""
    named = {}
    for key, value in metrics.items():
        section, name = split_and_name(key, split)
        named[f"{prefix}{section}/{name}"] = value
    return named


def evaluation_name(key: str, split: str) -> str:
    """The MLflow name of one evaluation metric (the primary score's: ``test/bleu``)."""
    section, name = split_and_name(key, split)
    return f"{section}/{name}"


def section(name: str) -> str:
    """The section of an MLflow metric name: the split of an evaluation score (``test_unseen``)."""
    return name.split("/", 1)[0]
