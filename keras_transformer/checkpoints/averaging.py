"""Checkpoint averaging (section 6.1).

"For the base models, we used a single model obtained by averaging the last 5 checkpoints, which
were written at 10-minute intervals. For the big models, we averaged the last 20 checkpoints."
:func:`average_checkpoints` does this for ``tf.train.Checkpoint`` files written by the training
stage (layout: :mod:`keras_transformer.checkpoints.model_checkpoint`): it averages the model's variables only
(never the optimizer slots or step counters), in float32, reading one tensor at a time, and
writes a new checkpoint plus a ``.keras`` model to a directory other than the training directory.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from keras_transformer.checkpoints.model_checkpoint import (
    MODEL_CONFIG_FILE,
    MODEL_KEY,
    CheckpointMismatchError,
    build_model,
    check_model_matches,
    checkpoint_directory,
    checkpoint_key,
    config_differences,
    model_config_dict,
    model_keys,
    model_weight_paths,
    model_weights_trackable,
    read_model_config,
    resolve_checkpoints,
    write_model_config,
)
from keras_transformer.models.transformer import Transformer

logger = logging.getLogger(__name__)


@dataclass
class AveragingResult:
    """Where the averaged weights went and what they came from."""

    checkpoint: str
    keras_model: Path | None
    sources: list[str]
    model_config: dict[str, Any] | None = field(default=None, repr=False)


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
    except ValueError:
        return False
    return True


def average_checkpoints(
    paths_or_dir,
    last_n: int | None = None,
    output: str | Path | None = None,
    *,
    save_keras: bool = True,
    model: Transformer | None = None,
) -> AveragingResult:
    """Averages the model weights of the last ``last_n`` checkpoints (section 6.1).

    Args:
        paths_or_dir: a training directory or a list of checkpoint prefixes.
        last_n: how many of the newest checkpoints to average (5 for the paper's base models,
            20 for big: ``get_preset(name).training.checkpoints_to_average``); ``None`` averages
            all given.
        output: a directory outside every source checkpoint's directory; receives the averaged
            checkpoint ``averaged-<n>`` (found by ``tf.train.latest_checkpoint``),
            ``model_config.json`` and (``save_keras``)
            ``model.keras``.
        model: the model to average into when the checkpoints have no ``model_config.json``.

    Only the model's weights are averaged: optimizer moments and step counters are not model
    state, and averaging them would be meaningless. Sums are taken in float32 one tensor at a
    time across the checkpoint readers, so memory stays near one model. Checkpoints of different
    models (variable names or shapes, preset, architecture or vocabulary in
    ``model_config.json``) are refused with ``CheckpointMismatchError`` naming the files.
    """
    if output is None:
        raise ValueError("give an output directory for the averaged model")
    sources = resolve_checkpoints(paths_or_dir, last_n)
    output = Path(output)
    for source in sources:
        source_dir = checkpoint_directory(source)
        if _inside(output, source_dir):
            raise ValueError(
                f"refusing to write the averaged model into {output}: it is inside the "
                f"training directory {source_dir}, whose checkpoint manager owns its files; "
                "choose another output directory"
            )

    # Every checkpoint must describe the same model: same config JSON (when present) ...
    infos = {}
    for source in sources:
        directory = checkpoint_directory(source)
        if directory not in infos:
            infos[directory] = read_model_config(directory)
    known = [(d, i) for d, i in infos.items() if i is not None]
    if known and len(known) != len(infos):
        missing = [str(d) for d, i in infos.items() if i is None]
        raise CheckpointMismatchError(
            f"{MODEL_CONFIG_FILE} is missing in {missing} but present in "
            f"{[str(d) for d, _ in known]}; cannot tell whether these checkpoints hold the "
            "same model"
        )
    for directory, info in known[1:]:
        diffs = config_differences(known[0][1], info)
        if diffs:
            raise CheckpointMismatchError(
                f"checkpoints in {known[0][0]} and {directory} hold different models: "
                + "; ".join(diffs)
            )
    info = known[0][1] if known else None

    # ... and the same model variables with the same shapes.
    readers = [tf.train.load_checkpoint(s) for s in sources]
    keys = [model_keys(r) for r in readers]
    if not keys[0]:
        raise CheckpointMismatchError(
            f"{sources[0]} holds no '{MODEL_KEY}/...' weights; was it written by the training "
            "stage (tf.train.Checkpoint(model=model_weights_trackable(model)))?"
        )
    for source, k in zip(sources[1:], keys[1:]):
        if k != keys[0]:
            only_first = sorted(set(keys[0]) - set(k))[:5]
            only_this = sorted(set(k) - set(keys[0]))[:5]
            shapes = sorted(x for x in set(k) & set(keys[0]) if k[x] != keys[0][x])[:5]
            raise CheckpointMismatchError(
                f"{sources[0]} and {source} hold different model variables: only in the first "
                f"{only_first}, only in the second {only_this}, different shapes {shapes}"
            )

    if model is None:
        if info is None:
            raise CheckpointMismatchError(
                f"no {MODEL_CONFIG_FILE} beside {sources[0]}; pass `model=` to average into"
            )
        # The averaged model is float32 whatever the training precision: variables always were.
        model = build_model(info, dtype="float32")
    check_model_matches(model, keys[0], sources[0])

    by_key = {checkpoint_key(p): v for p, v in model_weight_paths(model).items()}
    n = len(readers)
    for key in sorted(keys[0]):
        variable = by_key[key]
        if not np.issubdtype(np.dtype(variable.dtype), np.floating):
            # Integer state (none in the Transformer) is not averaged; take the newest.
            variable.assign(readers[-1].get_tensor(key))
            continue
        total = np.zeros(keys[0][key], dtype=np.float32)
        for reader in readers:
            total += np.asarray(reader.get_tensor(key), dtype=np.float32)
        variable.assign(total / np.float32(n))
    logger.info("averaged %d checkpoints: %s", n, [os.path.basename(s) for s in sources])

    output.mkdir(parents=True, exist_ok=True)
    checkpoint = tf.train.Checkpoint(**{MODEL_KEY: model_weights_trackable(model)})
    # A CheckpointManager writes the `checkpoint` state file too, so that
    # tf.train.latest_checkpoint(output) finds the average; it replaces an earlier average.
    manager = tf.train.CheckpointManager(
        checkpoint, str(output), max_to_keep=1, checkpoint_name="averaged"
    )
    prefix = manager.save(checkpoint_number=n)
    out_info = model_config_dict(
        model,
        preset=(info or {}).get("preset"),
        vocabulary=(info or {}).get("vocabulary"),
    )
    out_info["averaged_from"] = [str(s) for s in sources]
    write_model_config(output, out_info)
    keras_path = None
    if save_keras:
        keras_path = output / "model.keras"
        model.save(keras_path)
    logger.info("wrote the averaged model to %s", output)
    return AveragingResult(
        checkpoint=prefix, keras_model=keras_path, sources=sources, model_config=out_info
    )
