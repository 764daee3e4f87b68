"""The settings reference (``docs/settings.md``), generated from the typed configs.

Every section of a pipeline's YAML file is a dataclass; each field's one line is its ``#:``
comment in the source (the Sphinx autodoc convention: the comment lines just above the field, or
one after it on the same line). This module walks the dataclasses (:func:`dataclasses.fields`,
:func:`typing.get_type_hints`) and writes one table per section: key, type, default, what it does.

    python -m flows.settings_reference > docs/settings.md
    python -m flows.settings_reference --output docs/settings.md
    python -m flows.settings_reference --check docs/settings.md   # exit 1 if it is out of date

Nothing here imports TensorFlow, Prefect or MLflow.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import io
import re
import sys
import textwrap
import tokenize
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Where the reference lives in the repository.
REFERENCE = Path("docs/settings.md")
#: The command that writes it.
COMMAND = f"python -m flows.settings_reference --output {REFERENCE}"


@dataclass(frozen=True)
class Section:
    """One table of the reference: the settings of ``config`` under the YAML path ``path``."""

    path: str
    config: type
    #: Which task or model the section belongs to, when two classes share a path ("translation").
    variant: str = ""
    #: Fields left out (not settable there).
    skip: tuple[str, ...] = ()
    #: Fields that are sections of their own: a row linking to their table.
    subsections: tuple[str, ...] = ()
    #: A sentence under the heading.
    note: str = ""

    @property
    def title(self) -> str:
        where = f"`{self.path}`" if self.path else "top level"
        variant = f", {self.variant}" if self.variant else ""
        return f"{where} ({self.config.__name__}{variant})"

    @property
    def anchor(self) -> str:
        """The heading's link target: the path, and the variant's first word (``data-translation``)."""
        words = [self.path.replace(".", "-") or "top-level", *self.variant.split()[:1]]
        return "-".join(words).lower()


def _is_config(kind: Any) -> bool:
    from pipelines.config import dataclass_of

    kind = dataclass_of(kind)  # a section a scalar may stand for (`export: false`)
    return isinstance(kind, type) and dataclasses.is_dataclass(kind)


def _config_of(kind: Any) -> type:
    from pipelines.config import dataclass_of

    return dataclass_of(kind)


def _hints(config: type) -> dict[str, Any]:
    """The fields' types, resolved where they can be (a name imported for type checking only stays a string)."""
    try:
        return typing.get_type_hints(config)
    except (NameError, TypeError):
        return {f.name: f.type for f in dataclasses.fields(config)}


def _fields(config: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(config) if f.init]


def task_configs() -> dict[str, tuple[type, type]]:
    """Each task's ``data`` and ``evaluation`` config classes, by task name."""
    from pipelines.tasks.parsing.task import ParsingTask
    from pipelines.tasks.translation.task import TranslationTask

    return {task.name: (task.data_config, task.eval_config) for task in (TranslationTask, ParsingTask)}


def task_sections() -> dict[str, dict[str, type]]:
    """The sections only one task's pipeline has (translation's ``synthetic``), by task name."""
    from pipelines.tasks.parsing.task import ParsingTask
    from pipelines.tasks.translation.task import TranslationTask

    return {task.name: task.sections for task in (TranslationTask, ParsingTask) if task.sections}


def model_configs() -> dict[str, type]:
    """The architectures' config classes (what ``train.model`` sets), by architecture name."""
    from keras_transformer.models.config import ARCHITECTURES

    return dict(ARCHITECTURES)


def _nested(path: str, config: type, variant: str = "") -> Iterator[Section]:
    """``config``'s section and, after it, those of its fields that are configs themselves."""
    hints = _hints(config)
    nested = [f.name for f in _fields(config) if _is_config(hints.get(f.name))]
    yield Section(path, config, variant, subsections=tuple(nested))
    for name in nested:
        yield from _nested(f"{path}.{name}", _config_of(hints[name]), variant)


def sections() -> list[Section]:
    """Every table of the reference, in the order a pipeline file's sections come."""
    from flows.pipeline_config import PipelineConfig
    from keras_transformer.models.presets import DecodingSettings, TrainingRecipe
    from pipelines.tokenization import TokenizerConfig

    tasks = task_configs()
    hints = _hints(PipelineConfig)
    top = [f.name for f in _fields(PipelineConfig)]
    result = [Section("", PipelineConfig, subsections=tuple(
        n for n in top if n in ("data", "evaluation") or _is_config(hints.get(n))))]
    for name in top:
        if name in ("data", "evaluation"):
            for task, (data, evaluation) in tasks.items():
                result.extend(_nested(name, data if name == "data" else evaluation, f"{task} task"))
        elif _is_config(hints.get(name)):
            for section in _nested(name, _config_of(hints[name])):
                result.append(section)
                if section.config is TokenizerConfig:
                    result.append(_tokenizer_target())
                if section.path == "train":
                    result.extend(_model_sections(section.config))
    for task, own in task_sections().items():
        for name, config in own.items():
            result.extend(_nested(name, config, f"{task} task"))
    result.append(Section("training", TrainingRecipe, "preset section", note=(
        "A preset's recipe in `keras_transformer/models/presets.yaml`; `train.*` overrides its "
        "`train_steps`, `train_minutes`, `warmup_steps`, `label_smoothing`, `learning_rate_scale`, "
        "`decay_fraction` and `tokens_per_batch` (as `train.tokens_per_step`).")))
    result.append(Section("decoding", DecodingSettings, "preset section", note=(
        "A preset's decoding in `keras_transformer/models/presets.yaml`, saved with the model: the "
        "evaluation, the `Translator`, the export, the pyfunc and the served model decode with it.")))
    return result


def _tokenizer_target() -> Section:
    from pipelines.tokenization import TARGET_SETTINGS, TokenizerConfig

    same = tuple(f.name for f in _fields(TokenizerConfig) if f.name not in TARGET_SETTINGS)
    return Section("tokenizer.target", TokenizerConfig, skip=same, note=(
        "With `tokenizer.shared: false`, the target side's vocabulary takes the settings above and "
        "these keys where it differs, e.g. `{model_type: word, vocab_size: 200}` for the parse trees."))


def _model_sections(train: type) -> list[Section]:
    """``train.model``'s settings: one table per architecture (unless ``model`` is a config itself)."""
    if _is_config(_hints(train).get("model")):
        return []
    return [Section("train.model", config, f"{name} architecture", note=(
        "Overrides of the preset's architecture (`presets.yaml`: `model`); the vocabulary sizes and "
        "the treebank's facts are filled in by the training stage."))
        for name, config in model_configs().items()]


def settings() -> list[str]:
    """Every setting the reference lists, as ``path.key (variant)``: each row of its tables but those of a
    section with a table of its own."""
    return [f"{section.path}.{item.name}".lstrip(".") + (f" ({section.variant})" if section.variant else "")
            for section in sections() for item in _fields(section.config)
            if item.name not in section.skip and item.name not in section.subsections]


@functools.cache
def config_classes() -> tuple[type, ...]:
    """Every config class the reference documents, once each."""
    return tuple(dict.fromkeys(section.config for section in sections()))


# -- the one line of each field: its ``#:`` comment -----------------------------------------------

@functools.cache
def _class_comments(config: type) -> dict[str, str]:
    """``{field: its #: comment}`` from ``config``'s own source (not its bases')."""
    try:
        source = textwrap.dedent(inspect.getsource(config))
    except (OSError, TypeError):  # made at run time (a task's pipeline config): no source
        return {}
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    lines = source.splitlines()
    trailing = _trailing_comments(source)
    comments = {}
    for statement in node.body:
        if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
            continue
        above, row = [], statement.lineno - 2
        while row >= 0 and lines[row].strip().startswith("#:"):
            above.insert(0, lines[row].strip()[2:].strip())
            row -= 1
        text = " ".join(above) or trailing.get(statement.end_lineno, "")
        if text:
            comments[statement.target.id] = text
    return comments


def _trailing_comments(source: str) -> dict[int, str]:
    """``{line: text}`` of the ``#:`` comments that end a line of code."""
    found = {}
    code_lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and token.string.startswith("#:") and token.start[0] in code_lines:
            found[token.start[0]] = token.string[2:].strip()
        elif token.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                                tokenize.DEDENT):
            code_lines.add(token.start[0])
    return found


def field_doc(config: type, name: str) -> str:
    """The one line of field ``name``: its ``#:`` comment (the nearest class in ``config``'s MRO that has
    one), else its ``doc`` metadata, else, for a class made at run time from another (all fields optional,
    e.g. a partial override of a preset's section), the comment of that class's field; or ""."""
    for klass in config.__mro__:
        if dataclasses.is_dataclass(klass) and name in _class_comments(klass):
            return _class_comments(klass)[name]
    item = {f.name: f for f in dataclasses.fields(config)}.get(name)
    if item is not None and item.metadata.get("doc"):
        return str(item.metadata["doc"])
    original = _made_from(config)
    return field_doc(original, name) if original is not None else ""


def _made_from(config: type) -> type | None:
    """The documented config whose fields a source-less config repeats (all of them, by name)."""
    if _class_comments(config) or _has_source(config):
        return None
    names = {f.name for f in dataclasses.fields(config)}
    for candidate in config_classes():
        fields = {f.name for f in dataclasses.fields(candidate)}
        if candidate is not config and _has_source(candidate) and names <= fields:
            return candidate
    return None


def _has_source(config: type) -> bool:
    try:
        inspect.getsource(config)
    except (OSError, TypeError):
        return False
    return True


# -- rendering --------------------------------------------------------------------------------

def type_name(kind: Any) -> str:
    """A field's type as a reader writes it: ``int | None``, ``list[str]``, ``SourceConfig``."""
    if isinstance(kind, str):
        return kind
    if kind is type(None):
        return "None"
    if kind is Any:
        return "any"
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(arg) for arg in typing.get_args(kind))
    if origin is typing.Literal:
        return " | ".join(repr(arg) for arg in typing.get_args(kind))
    if origin is not None:
        args = ", ".join("..." if arg is Ellipsis else type_name(arg) for arg in typing.get_args(kind))
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{args}]" if args else name
    return getattr(kind, "__name__", str(kind))


def default_text(item: dataclasses.Field) -> str:
    """A field's default as YAML (``null``, ``true``, ``[train]``); "" for a section or a required field."""
    if item.default is not dataclasses.MISSING:
        value = item.default
    elif item.default_factory is not dataclasses.MISSING:
        value = item.default_factory()
        if dataclasses.is_dataclass(value):
            return ""
    else:
        return ""
    return _yaml(value)


def _yaml(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float):
        return repr(value) if abs(value) >= 1e-4 or value == 0 else f"{value:.0e}"
    if isinstance(value, str):
        return value if value and value.strip() == value and not any(c in value for c in ":#{}[],'\"") \
            else repr(value)
    return str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def section_table(section: Section, anchors: dict[tuple[str, str], str]) -> list[str]:
    """The table of ``section``'s keys; a key with a table of its own links to it (``anchors``: the
    table of each path and variant, and the first of each path under ``(path, "")``)."""
    hints = _hints(section.config)
    rows = ["| key | type | default | what it sets |", "|---|---|---|---|"]
    for item in _fields(section.config):
        if item.name in section.skip:
            continue
        path = f"{section.path}.{item.name}".lstrip(".")
        anchor = anchors.get((path, section.variant)) or anchors.get((path, ""))
        key = f"[`{item.name}`](#{anchor})" if anchor else f"`{item.name}`"
        subsection = item.name in section.subsections
        kind = "section" if subsection else f"`{_cell(type_name(hints.get(item.name, item.type)))}`"
        default = "" if subsection else default_text(item)
        rows.append(f"| {key} | {kind} | {'`' + _cell(default) + '`' if default else ''} | "
                    f"{_cell(markdown(field_doc(section.config, item.name)))} |")
    return rows


def markdown(text: str) -> str:
    """reStructuredText's inline markup as Markdown: ````x```` and ``:mod:`a.b``` become `` `x` ``."""
    text = re.sub(r":(?:mod|class|func|meth|attr|data):`~?\.?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def render() -> str:
    """The whole of ``docs/settings.md``."""
    all_sections = sections()
    anchors: dict[tuple[str, str], str] = {}
    for section in all_sections:
        anchors.setdefault((section.path, section.variant), section.anchor)
        anchors.setdefault((section.path, ""), section.anchor)
    out = [
        "# Settings reference",
        "",
        f"<!-- Generated by `{COMMAND}` from the typed configs and their `#:` comments; do not edit. -->",
        "",
        "A pipeline run is configured by one YAML file (`configs/translation/*.yaml`, `configs/parsing/*.yaml`);",
        "each top-level section is the typed config of one stage, and any key can be set on the command",
        "line with `--set SECTION.KEY=VALUE`. A key not listed here is an error (the message names the",
        "closest known key). Defaults are YAML: `null` leaves a setting to the preset or to a value the",
        "stage derives (as the line says). `train.preset` picks a preset of",
        "`keras_transformer/models/presets.yaml`, whose `model`, `training` and `decoding` sections are",
        "listed at the end.",
        "",
    ]
    out += [f"- [{section.title}](#{section.anchor})" for section in all_sections]
    for section in all_sections:
        out += ["", f'<a id="{section.anchor}"></a>', "", f"## {section.title}", ""]
        doc = markdown((inspect.getdoc(section.config) or "").split("\n\n")[0].replace("\n", " "))
        if section.note:
            out += [section.note, ""]
        elif doc:
            out += [doc, ""]
        out += section_table(section, anchors)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.settings_reference", description=(
        "Writes the settings reference (every section, key, type, default and one line) from the typed configs."))
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--output", type=Path, help=f"write it to this file (the repository's: {REFERENCE})")
    group.add_argument("--check", type=Path, metavar="FILE",
                       help="exit 1 if FILE differs from what would be written now")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.check.read_text(encoding="utf-8") if args.check.exists() else ""
        if current != text:
            print(f"{args.check} is out of date; regenerate it with: {COMMAND}", file=sys.stderr)
            return 1
        return 0
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
