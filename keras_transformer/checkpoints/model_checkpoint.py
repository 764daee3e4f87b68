"""The checkpoint layout of a training run: weights under their Keras paths, model_config.json.

``tf.train.Checkpoint(model=transformer)`` does not see the encoder and decoder layers of a
Keras 3 model on the TensorFlow backend (Keras wraps lists of layers in its own ``TrackedList``,
which TensorFlow's checkpoint graph does not follow), so only the embedding would be saved.
Training therefore checkpoints :func:`model_weights_trackable` instead: the model's weights
under their Keras paths without the model's own name, e.g. the checkpoint key
``model/encoder_layer_0/self_attention/query/kernel/.ATTRIBUTES/VARIABLE_VALUE``. Beside the
checkpoints, ``model_config.json`` (:func:`write_model_config`) records the preset, the full
``TransformerConfig`` and the vocabulary, so that a model can be rebuilt from the files alone
(:func:`load_model_from_checkpoint`) and checkpoints of different models are told apart.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import tensorflow as tf

from keras_transformer.files import atomic_write_bytes
from keras_transformer.models.architectures import architecture_of
from keras_transformer.models.architectures import build_model as build_architecture
from keras_transformer.models.config import config_class
from keras_transformer.models.presets import get_preset, preset_names
from keras_transformer.models.transformer import Transformer

MODEL_CONFIG_FILE = "model_config.json"
MODEL_CONFIG_FORMAT = 1
#: The checkpoint object under which the model's weights are stored.
MODEL_KEY = "model"
_VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"


class CheckpointMismatchError(ValueError):
    """Checkpoints (or a checkpoint and a model) do not hold the same model; names the files."""


# --------------------------------------------------------------------------- checkpoint layout


def _relative_path(model, variable) -> str:
    path = variable.path
    prefix = f"{model.name}/"
    # The model's own name is "transformer", "transformer_1", ... depending on how many models
    # the process created; leaving it out keeps keys identical across processes.
    return path.removeprefix(prefix)


def model_weight_paths(model) -> dict[str, Any]:
    """``{relative Keras path: keras.Variable}`` of all the model's weights (built model)."""
    if not model.built:
        model.build()
    weights: dict[str, Any] = {}
    for variable in model.weights:
        path = _relative_path(model, variable)
        if path in weights and weights[path] is not variable:
            raise ValueError(f"two weights of {model.name} share the path {path!r}")
        weights[path] = variable
    return weights


def model_weights_trackable(model) -> tf.Module:
    """A trackable tree of the model's weights by Keras path, for ``tf.train.Checkpoint``.

    ``tf.train.Checkpoint(model=model_weights_trackable(m))`` stores every weight of ``m`` under
    ``model/<path>/.ATTRIBUTES/VARIABLE_VALUE`` (see the module docstring for why the model
    itself is not checkpointed). The tree tracks the underlying ``tf.Variable`` (a distributed
    variable inside a ``tf.distribute`` scope), so restoring it restores the model in place.
    """
    root = tf.Module()
    nodes: dict[tuple[str, ...], tf.Module] = {(): root}
    for path, variable in model_weight_paths(model).items():
        *parents, leaf = path.split("/")
        node = root
        for depth in range(1, len(parents) + 1):
            key = tuple(parents[:depth])
            if key not in nodes:
                nodes[key] = tf.Module()
                setattr(node, parents[depth - 1], nodes[key])
            node = nodes[key]
        setattr(node, leaf, getattr(variable, "value", variable))
    return root


def checkpoint_key(path: str) -> str:
    """The checkpoint key of the model weight at relative Keras ``path``."""
    return f"{MODEL_KEY}/{path}{_VALUE_SUFFIX}"


def model_keys(reader_or_path) -> dict[str, list[int]]:
    """``{key: shape}`` of the model weights stored in a checkpoint (no optimizer, no counters)."""
    reader = (
        tf.train.load_checkpoint(str(reader_or_path))
        if isinstance(reader_or_path, (str, os.PathLike))
        else reader_or_path
    )
    shapes = reader.get_variable_to_shape_map()
    return {
        key: list(shape)
        for key, shape in shapes.items()
        if key.startswith(f"{MODEL_KEY}/") and key.endswith(_VALUE_SUFFIX)
    }


# --------------------------------------------------------------------------- model config JSON


def model_config_dict(
    model: Transformer,
    preset: str | None = None,
    vocabulary: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What ``model_config.json`` records: enough to rebuild the model and spot mismatches.

    ``vocabulary`` identifies the subword vocabulary (e.g. ``{"fingerprint": ..., "size": ...}``)
    so that two models with equal shapes but different vocabularies are not averaged together.
    """
    architecture = architecture_of(model)
    return {
        "format": MODEL_CONFIG_FORMAT,
        "model_class": f"keras_transformer.{type(model).__name__}",
        "architecture": architecture,
        "preset": preset,
        "config": model.config.to_dict(),
        "vocabulary": vocabulary,
        "weights": {path: list(v.shape) for path, v in model_weight_paths(model).items()},
    }


def write_model_config(directory: str | Path, info: dict[str, Any]) -> Path:
    """Writes ``info`` (from :func:`model_config_dict`) to ``directory/model_config.json``."""
    path = Path(directory) / MODEL_CONFIG_FILE
    atomic_write_bytes(path, (json.dumps(info, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return path


def read_model_config(directory: str | Path) -> dict[str, Any] | None:
    """The ``model_config.json`` of ``directory`` (``None`` when there is none)."""
    path = Path(directory) / MODEL_CONFIG_FILE
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as err:
        raise CheckpointMismatchError(f"{path}: not valid JSON: {err}") from err
    if info.get("format") != MODEL_CONFIG_FORMAT:
        raise CheckpointMismatchError(
            f"{path}: unsupported model config format {info.get('format')!r} "
            f"(expected {MODEL_CONFIG_FORMAT})"
        )
    return info


def config_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Human-readable differences of two model configs (preset, architecture, vocabulary)."""
    diffs = []
    if a.get("architecture", "transformer") != b.get("architecture", "transformer"):
        diffs.append(f"architecture {a.get('architecture')!r} != {b.get('architecture')!r}")
    if a.get("preset") != b.get("preset"):
        diffs.append(f"preset {a.get('preset')!r} != {b.get('preset')!r}")
    ca, cb = a.get("config") or {}, b.get("config") or {}
    for key in sorted(set(ca) | set(cb)):
        if ca.get(key) != cb.get(key):
            diffs.append(f"{key} {ca.get(key)!r} != {cb.get(key)!r}")
    if a.get("vocabulary") != b.get("vocabulary"):
        diffs.append(f"vocabulary {a.get('vocabulary')!r} != {b.get('vocabulary')!r}")
    return diffs


def build_model(info: dict[str, Any], dtype=None) -> Transformer:
    """A new, built model of the architecture recorded in ``info`` (a ``Transformer`` unless it
    names another; files written before architectures were recorded hold Transformers)."""
    architecture = info.get("architecture", "transformer")
    config_type = config_class(architecture)
    config = config_type(**config_type.saved_settings(info["config"]))
    model = build_architecture(architecture, config, dtype=dtype)
    if info.get("preset") in preset_names() and hasattr(model, "decoding"):
        # The averaged model a run saves then decodes as its preset does (its model.keras keeps it).
        model.decoding = get_preset(info["preset"]).decoding
    return model


def checkpoint_directory(checkpoint_path: str | Path) -> Path:
    """The directory of a checkpoint prefix (``runs/train/ckpt-100`` -> ``runs/train``)."""
    return Path(checkpoint_path).parent


def load_model_from_checkpoint(
    checkpoint_path: str | Path, model: Transformer | None = None, dtype=None
) -> Transformer:
    """A ``Transformer`` with the weights of a training (or averaged) checkpoint.

    ``checkpoint_path`` is a checkpoint prefix or a directory (its latest checkpoint). The
    architecture comes from ``model_config.json`` beside the checkpoint unless ``model`` is
    given. Every weight of the model must be in the checkpoint.
    """
    path = _resolve_one(checkpoint_path)
    if model is None:
        info = read_model_config(checkpoint_directory(path))
        if info is None:
            raise FileNotFoundError(
                f"no {MODEL_CONFIG_FILE} beside {path}; pass the model to restore into"
            )
        model = build_model(info, dtype=dtype)
    check_model_matches(model, model_keys(path), path)
    tf.train.Checkpoint(**{MODEL_KEY: model_weights_trackable(model)}).read(
        path
    ).expect_partial().assert_existing_objects_matched()
    return model


def _resolve_one(checkpoint_path: str | Path) -> str:
    path = Path(checkpoint_path)
    if path.is_dir():
        latest = tf.train.latest_checkpoint(str(path))
        if latest is None:
            raise FileNotFoundError(f"{path}: no checkpoint in this directory")
        return latest
    if not Path(f"{path}.index").is_file():
        raise FileNotFoundError(f"{path}: not a checkpoint (no {path}.index)")
    return str(path)


def check_model_matches(model, keys: dict[str, list[int]], source: str) -> None:
    expected = {checkpoint_key(p): list(v.shape) for p, v in model_weight_paths(model).items()}
    missing = sorted(set(expected) - set(keys))
    extra = sorted(set(keys) - set(expected))
    wrong = sorted(k for k in set(expected) & set(keys) if expected[k] != keys[k])
    if missing or extra or wrong:
        details = []
        if missing:
            details.append(f"missing {missing[:5]}")
        if extra:
            details.append(f"unexpected {extra[:5]}")
        if wrong:
            details.append(
                "shape mismatch " + ", ".join(f"{k}: {keys[k]} vs model {expected[k]}" for k in wrong[:5])
            )
        raise CheckpointMismatchError(
            f"{source} does not hold this model's weights: {'; '.join(details)}"
        )


# --------------------------------------------------------------------------- averaging


def resolve_checkpoints(paths_or_dir, last_n: int | None = None) -> list[str]:
    """The checkpoint prefixes to average, oldest first.

    ``paths_or_dir`` is a training directory (its ``checkpoint`` state file lists the kept
    checkpoints in order) or a list of checkpoint prefixes. ``last_n`` keeps the newest N and
    requires at least N to exist.
    """
    if isinstance(paths_or_dir, (str, os.PathLike)):
        directory = Path(paths_or_dir)
        if not directory.is_dir():
            return [_resolve_one(directory)][-(last_n or 1):]
        state = tf.train.get_checkpoint_state(str(directory))
        if state is None or not state.all_model_checkpoint_paths:
            raise FileNotFoundError(f"{directory}: no checkpoint in this directory")
        # get_checkpoint_state already joins relative entries to the directory it was given.
        paths = [str(p) for p in state.all_model_checkpoint_paths]
    else:
        paths = [str(p) for p in paths_or_dir]
    if not paths:
        raise ValueError("no checkpoint given to average")
    if last_n is not None:
        if last_n < 1:
            raise ValueError(f"last_n must be >= 1, got {last_n}")
        if len(paths) < last_n:
            raise ValueError(
                f"asked to average the last {last_n} checkpoints but only {len(paths)} exist "
                f"({paths}); keep at least {last_n} checkpoints during training"
            )
        paths = paths[-last_n:]
    for p in paths:
        _resolve_one(p)
    return paths
