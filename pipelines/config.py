"""Typed stage configuration: one dataclass per stage, loadable from YAML.

Every stage of the pipeline takes a single dataclass (``DownloadConfig``, ``TokenizerConfig``,
``InputConfig``, ``TrainConfig``, ...). This module turns YAML files or plain dicts into those
dataclasses, recursing into nested dataclass fields, and rejects unknown keys with an error that
names the file, the line and the key (and the closest known key), so that a typo fails in one line
before any work is done. A setting (or a value of one) taken out of the product is declared on its
dataclass (``removed_settings``, ``removed_values``), so that a config still naming it fails in one
line saying it was removed and why, instead of as a typo.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import yaml

from keras_transformer.models.config import DROPPED  # noqa: F401 (the stage configs' reason too)

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value or key is invalid; the message names the setting and its source."""


class SettingError(ConfigError):
    """One setting's value is invalid: raised by a config's ``__post_init__`` checks, so that
    :func:`from_dict` can point at that setting's own line (or its ``--set``), not its section's;
    ``at`` names a key inside a dict-valued setting (``train.model``'s ``dropout``)."""

    def __init__(self, config: Any, name: str, why: str, *, within: tuple[str, ...] = (), at: str | None = None):
        self.path = (*within, name) if at is None else (*within, name, at)
        self.config, self.name, self.why, self.within, self.at = config, name, why, within, at
        value = getattr(config, name) if at is None else getattr(config, name)[at]
        super().__init__(f"{type(config).__name__}.{'.'.join(self.path)}={value!r}: {why}")

    def nested_in(self, key: str) -> SettingError:
        """This error one level down, for a copy of a config checked under its setting ``key``
        (``tokenizer.target`` holds the target side's own settings)."""
        return SettingError(self.config, self.name, self.why, within=(key, *self.within), at=self.at)


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _unwrap_optional(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def dataclass_of(tp: Any) -> Any:
    """The one dataclass type of a union (``ExportConfig | bool``), which a mapping builds; else ``tp``."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        classes = [arg for arg in typing.get_args(tp) if _is_dataclass_type(arg)]
        if len(classes) == 1:
            return classes[0]
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


class Origin(NamedTuple):
    """Where the settings came from, so that an error can point at the line to fix.

    ``lines`` maps a key path (``("train", "warmup_steps")``) to its line in ``source``;
    ``overridden`` holds the key paths that came from ``overrides_source`` instead (``--set``).
    """

    source: str
    lines: dict[tuple[str, ...], int] = {}
    overridden: frozenset[tuple[str, ...]] = frozenset()
    overrides_source: str = "overrides"

    def where(self, path: tuple[str, ...], shown: tuple[str, ...] | None = None) -> str:
        """``file:line: key``: the line of ``path`` (or of its nearest enclosing key that has one),
        the key ``shown`` (default ``path``); ``--set key`` for a setting that came from there."""
        key = ".".join(path if shown is None else shown)
        if path in self.overridden:
            return f"{self.overrides_source} {'.'.join(path)}"
        for depth in range(len(path), 0, -1):
            line = self.lines.get(path[:depth])
            if line is not None:
                return f"{self.source}:{line}: {key}" if key else f"{self.source}:{line}"
        return f"{self.source}:{key}" if key else self.source


def _suggestion(unknown: str, known: list[str], prefix: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(unknown, known, n=1, cutoff=0.6)
    if close:
        return f"did you mean {'.'.join((*prefix, close[0]))}?"
    return f"known: {', '.join(known)}"


def removed(cls: type, data: dict[str, Any]) -> tuple[str, str] | None:
    """``(key, " was removed (why)")`` for the first setting of ``data`` that ``cls`` took out of
    the product (``"='value' was removed (why)"`` for a removed value), or ``None``. ``cls``
    declares them: ``removed_settings`` maps a removed key to why it went, ``removed_values`` a
    still-existing key to ``{removed value: why}``."""
    for key, value in data.items():
        why = getattr(cls, "removed_settings", {}).get(key)
        if why is not None:
            return key, f" was removed ({why})"
        values = getattr(cls, "removed_values", {}).get(key, {})
        if isinstance(value, typing.Hashable) and value in values:
            return key, f"={value!r} was removed ({values[value]})"
    return None


def from_dict(cls: type[T], data: dict[str, Any] | None, *, source: str | Origin = "<dict>",
              _path: tuple[str, ...] = ()) -> T:
    """Builds dataclass ``cls`` from ``data``; nested dataclass fields take nested dicts.

    Raises ``ConfigError`` naming ``source`` (with the line, when it is an :class:`Origin` with
    lines) and the offending key, with the closest known key for an unknown one and the reason
    for a removed one (:func:`removed`).
    """
    origin = source if isinstance(source, Origin) else Origin(source)
    data = dict(data or {})
    if not _is_dataclass_type(cls):
        raise TypeError(f"{cls!r} is not a dataclass type")
    gone = removed(cls, data)
    if gone is not None:
        key, message = gone
        raise ConfigError(f"{origin.where((*_path, key))}{message}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        key = unknown[0]
        more = f" (and {unknown[1:]})" if len(unknown) > 1 else ""
        raise ConfigError(f"{origin.where((*_path, key))}: unknown setting of {cls.__name__}{more}; "
                          f"{_suggestion(key, sorted(fields), _path)}")
    kwargs = {}
    for name, value in data.items():
        tp = _unwrap_optional(hints.get(name, Any))
        if isinstance(value, dict):
            tp = dataclass_of(tp)
        if _is_dataclass_type(tp) and isinstance(value, dict):
            value = from_dict(tp, value, source=origin, _path=(*_path, name))
        elif not _matches(value, hints.get(name, Any)):
            # Before the dataclass sees it: "vocab_size: abc" must not surface as a comparison error.
            raise ConfigError(f"{origin.where((*_path, name), _path)}: {cls.__name__}.{name}={value!r}: expected "
                              f"{_type_name(hints.get(name, Any))}, got {type(value).__name__}")
        elif typing.get_origin(tp) is tuple and isinstance(value, list):
            value = tuple(value)
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        if isinstance(err, SettingError):
            raise ConfigError(f"{origin.where((*_path, *err.path), _path)}: {err}") from err
        if isinstance(err, ConfigError):
            raise ConfigError(f"{origin.where(_path)}: {err}") from err
        raise ConfigError(f"{origin.where(_path)}: invalid {cls.__name__}: {err}") from err


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` applied, nested dicts merged key by key."""
    out = dict(base)
    for key, value in override.items():
        nested = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merge(out[key], value) if nested else value
    return out


class DuplicateKeyError(yaml.YAMLError):
    """A YAML mapping gives the same key twice: the second would silently win."""

    def __init__(self, path: tuple[str, ...], line: int, first: int):
        super().__init__(f"{'.'.join(path)}: given twice (first at line {first}); the second would silently win")
        self.path, self.line, self.first = path, line, first


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _key_lines(node: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], int]:
    """The line (1-based) of every key of a composed YAML mapping, by key path; raises
    :class:`DuplicateKeyError` for a key given twice in one mapping (YAML's loaders keep the
    last, so a second ``train:`` section would replace the first without a word)."""
    lines: dict[tuple[str, ...], int] = {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != _MERGE_TAG:  # "<<:" keys are YAML merges
                path = (*prefix, key.value)
                if path in lines:
                    raise DuplicateKeyError(path, key.start_mark.line + 1, lines[path])
                lines[path] = key.start_mark.line + 1
                lines.update(_key_lines(value, path))
    return lines


def _key_paths(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    paths = set()
    for key, value in data.items():
        paths.add((*prefix, key))
        if isinstance(value, dict):
            paths |= _key_paths(value, (*prefix, key))
    return paths


def load_config(cls: type[T], path: str | Path, *, section: str | None = None,
                overrides: dict[str, Any] | None = None, overrides_source: str = "overrides") -> T:
    """Loads dataclass ``cls`` from a YAML file (optionally one top-level ``section`` of it).

    ``overrides`` (a nested dict) is merged into the file's settings before anything is built,
    so defaults derived from one setting (paths under ``run_dir``) follow the overridden value.
    Errors name the file and line of a setting, or ``overrides_source`` (``--set``) for one
    that came from ``overrides``.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        lines = _key_lines(yaml.compose(text, Loader=yaml.SafeLoader))
        data = yaml.safe_load(text)
    except FileNotFoundError as err:
        raise ConfigError(f"config file not found: {path}") from err
    except IsADirectoryError as err:
        raise ConfigError(f"{path}: a directory, not a config file") from err
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from err
    except DuplicateKeyError as err:
        raise ConfigError(f"{path}:{err.line}: {err}") from err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: not valid YAML: {getattr(err, 'problem', None) or err}") from err
    if data is None:
        # An empty file (or one of comments) would run every default, in the default run_dir.
        raise ConfigError(f"{path}: empty: no settings")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    if section is not None:
        if section not in data:
            raise ConfigError(f"{path}: no section '{section}' (sections: {sorted(data)})")
        data = data[section]
    overridden: set[tuple[str, ...]] = set()
    if overrides:
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping, got {type(data).__name__}")
        data = merge(data, overrides)
        overridden = _key_paths(overrides, (section,) if section else ())
    origin = Origin(str(path), lines, frozenset(overridden), overrides_source)
    return from_dict(cls, data, source=origin, _path=(section,) if section else ())


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
