"""Typed stage configuration: one dataclass per stage, loadable from YAML.

Every stage of the pipeline takes a single dataclass (``DownloadConfig``, ``TokenizerConfig``,
``InputConfig``, ``TrainConfig``, ...). This module turns YAML files or plain dicts into those
dataclasses, recursing into nested dataclass fields, and rejects unknown keys with an error that
names the file and the key, so that a typo fails before any work is done.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value or key is invalid; the message names the setting and its source."""


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _unwrap_optional(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _matches(value: Any, hint: Any) -> bool:
    """Whether a YAML value fits a dataclass field's annotation (ints are floats, bools are not ints)."""
    if hint is Any or isinstance(hint, TypeVar):
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is not None:
        hint = {list: (list, tuple), tuple: (list, tuple), dict: dict}.get(origin, origin)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, (type, tuple)):
        return isinstance(value, hint)
    return True


def _type_name(hint: Any) -> str:
    return str(hint).replace("typing.", "") if not isinstance(hint, type) else hint.__name__


def from_dict(cls: type[T], data: dict[str, Any] | None, *, source: str = "<dict>") -> T:
    """Builds dataclass ``cls`` from ``data``; nested dataclass fields take nested dicts.

    Raises ``ConfigError`` naming ``source`` and the offending key for unknown keys.
    """
    data = dict(data or {})
    if not _is_dataclass_type(cls):
        raise TypeError(f"{cls!r} is not a dataclass type")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{source}: unknown setting(s) {unknown} for {cls.__name__}; "
            f"known settings are {sorted(fields)}"
        )
    kwargs = {}
    for name, value in data.items():
        tp = _unwrap_optional(hints.get(name, Any))
        if _is_dataclass_type(tp) and isinstance(value, dict):
            value = from_dict(tp, value, source=f"{source}:{name}")
        elif not _matches(value, hints.get(name, Any)):
            # Before the dataclass sees it: "vocab_size: abc" must not surface as a comparison error.
            raise ConfigError(f"{source}: {cls.__name__}.{name}={value!r}: expected "
                              f"{_type_name(hints.get(name, Any))}, got {type(value).__name__}")
        elif typing.get_origin(tp) is tuple and isinstance(value, list):
            value = tuple(value)
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(f"{source}: invalid {cls.__name__}: {err}") from err


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` applied, nested dicts merged key by key."""
    out = dict(base)
    for key, value in override.items():
        nested = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merge(out[key], value) if nested else value
    return out


def load_config(cls: type[T], path: str | Path, *, section: str | None = None,
                overrides: dict[str, Any] | None = None) -> T:
    """Loads dataclass ``cls`` from a YAML file (optionally one top-level ``section`` of it).

    ``overrides`` (a nested dict) is merged into the file's settings before anything is built,
    so defaults derived from one setting (paths under ``run_dir``) follow the overridden value.
    """
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
    except FileNotFoundError as err:
        raise ConfigError(f"config file not found: {path}") from err
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    source = str(path)
    if section is not None:
        if section not in data:
            raise ConfigError(f"{path}: no section '{section}' (sections: {sorted(data)})")
        data = data[section]
        source = f"{path}:{section}"
    if overrides:
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a mapping, got {type(data).__name__}")
        data = merge(data, overrides)
        source = f"{source} + overrides"
    return from_dict(cls, data, source=source)


def add_config_arguments(parser, cls: type) -> None:
    """``--config FILE.yaml [--section NAME]`` options for a stage CLI configured by ``cls``."""
    parser.add_argument("--config", type=Path, help=f"YAML file with {cls.__name__} settings")
    parser.add_argument("--section", default=None, help="top-level section of the YAML file")


def config_from_args(cls: type[T], args) -> T:
    """The ``cls`` named by :func:`add_config_arguments`' options, or its defaults without them."""
    return load_config(cls, args.config, section=args.section) if args.config else cls()


def to_dict(config: Any) -> dict[str, Any]:
    """The inverse of ``from_dict``: a plain dict, ready for YAML or MLflow params."""
    return dataclasses.asdict(config)
