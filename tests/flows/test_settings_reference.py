"""The settings reference (docs/settings.md) is complete and current: every field of every config
has its one line, and the file is what the generator writes now."""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path

import pytest

from flows import settings_reference
from flows.settings_reference import COMMAND, REFERENCE, config_classes, field_doc, render, sections

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rendered() -> str:
    return render()


def test_every_field_of_every_config_has_a_one_line_doc():
    undocumented = [f"{config.__module__}.{config.__name__}.{item.name}" for config in config_classes()
                    for item in dataclasses.fields(config) if item.init and not field_doc(config, item.name)]
    assert undocumented == [], (
        "add a `#:` comment just above each of these fields (the settings reference's one line):\n"
        + "\n".join(undocumented))


def test_the_reference_in_the_repository_is_what_the_generator_writes(rendered):
    current = (REPO / REFERENCE).read_text(encoding="utf-8") if (REPO / REFERENCE).exists() else ""
    assert current == rendered, f"{REFERENCE} is out of date: regenerate it with `{COMMAND}`"


def test_every_field_name_of_every_config_is_in_the_reference(rendered):
    missing = [f"{config.__name__}.{item.name}" for config in config_classes()
               for item in dataclasses.fields(config) if item.init and f"`{item.name}`" not in rendered]
    assert missing == []


#: Each setting is one a user has a reason to change; what lost every measurement left the product
#: (benchmarks/results/README.md, "Tried and dropped").
MAX_SETTINGS = 190


def test_the_reference_lists_at_most_max_settings_and_counts_what_it_shows(rendered):
    listed = settings_reference.settings()
    assert len(listed) <= MAX_SETTINGS, f"{len(listed)} settings:\n" + "\n".join(listed)
    assert len(listed) == len(set(listed))
    # The count is the reader's: every table row but the header and those linking a section of its own.
    rows = [line for line in rendered.splitlines() if line.startswith("| ") and not line.startswith("| key |")]
    assert len(listed) == len([row for row in rows if "| section |" not in row])


def test_the_sections_are_the_pipeline_files_sections():
    paths = {section.path for section in sections()}
    assert {"", "data", "data.cleaning", "tokenizer", "tokenizer.target", "input", "train", "train.model",
            "averaging", "evaluation", "tracking", "retention", "training", "decoding"} <= paths
    # Each task's data and evaluation settings differ: both are listed, under their task.
    variants = {section.variant for section in sections() if section.path == "data"}
    assert variants == {"translation task", "parsing task"}
    anchors = [section.anchor for section in sections()]
    assert len(anchors) == len(set(anchors))


def test_a_field_comment_is_read_from_the_source():
    @dataclasses.dataclass
    class Example:
        #: First line of the doc,
        #: joined with its second.
        documented: int = 1
        plain: str = "x"  #: A comment after the field counts too.
        # An ordinary comment is not a doc.
        undocumented: bool = False

    assert field_doc(Example, "documented") == "First line of the doc, joined with its second."
    assert field_doc(Example, "plain") == "A comment after the field counts too."
    assert field_doc(Example, "undocumented") == ""
    assert settings_reference.type_name(int | None) == "int | None"
    assert settings_reference.type_name(tuple[str, ...]) == "tuple[str, ...]"


def test_a_config_made_from_another_takes_its_docs():
    @dataclasses.dataclass
    class Original:
        #: The original's doc.
        value: int = 0

    made = dataclasses.make_dataclass("Made", [("value", int | None, dataclasses.field(default=None))])
    # Only classes of the reference are looked up: the preset's decoding and its evaluation overrides.
    decoding = next(s.config for s in sections() if s.path == "decoding")
    overrides = next(s.config for s in sections() if s.path == "evaluation.decoding")
    for item in dataclasses.fields(overrides):
        assert field_doc(overrides, item.name) == field_doc(decoding, item.name)
    assert field_doc(made, "value") == ""  # no original among the reference's classes
    assert field_doc(Original, "value") == "The original's doc."


def test_the_command_writes_and_checks_the_file(tmp_path, capsys, rendered):
    output = tmp_path / "settings.md"
    assert settings_reference.main(["--output", str(output)]) == 0
    assert output.read_text(encoding="utf-8") == rendered
    assert settings_reference.main(["--check", str(output)]) == 0
    output.write_text("stale\n", encoding="utf-8")
    assert settings_reference.main(["--check", str(output)]) == 1
    assert COMMAND in capsys.readouterr().err


def test_the_readme_links_the_reference():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert re.search(r"\]\(docs/settings\.md\)", readme), textwrap.shorten(readme, 200)
