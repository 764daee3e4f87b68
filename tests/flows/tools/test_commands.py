"""Every tool is a command of the package: a ``[project.scripts]`` entry naming its module's ``main``,
which answers ``--help`` with its own name and exits 0 (``wiring-check`` for each task as well)."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.commands import REPO

COMMANDS = {"choose-alpha": "flows.tools.choose_alpha", "compare-runs": "flows.tools.compare_runs",
            "compare-decodings": "flows.tools.compare_decodings", "wiring-check": "flows.tools.wiring_check",
            "recipe-search": "flows.tools.recipe_search"}


def test_every_tool_is_a_script_of_the_package():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert {name: scripts.get(name) for name in COMMANDS} == {name: f"{m}:main" for name, m in COMMANDS.items()}


@pytest.mark.parametrize("argv", [[name, "--help"] for name in COMMANDS]
                         + [["wiring-check", task, "--help"] for task in ("translation", "parsing")])
def test_help_names_the_command_and_exits_0(argv, capsys):
    main = importlib.import_module(COMMANDS[argv[0]]).main
    with pytest.raises(SystemExit) as stopped:
        main(argv[1:])
    assert stopped.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {' '.join(argv[:-1])} ")
    if argv == ["wiring-check", "--help"]:  # the tasks, each with its own options
        assert "{translation,parsing}" in out and "wiring-check TASK --help" in out
    else:  # each writes its report where --output says; the recipe search keeps its records in --out
        assert ("--out " if argv[0] == "recipe-search" else "--output") in out


def test_wiring_check_without_a_task_says_which_there_are(capsys):
    with pytest.raises(SystemExit) as stopped:
        importlib.import_module("flows.tools.wiring_check").main([])
    assert stopped.value.code == 2 and "{translation,parsing}" in capsys.readouterr().err


def test_the_installed_command_runs():
    # `make install` (pip install -e .) writes the scripts beside the interpreter.
    script = shutil.which("compare-decodings", path=str(Path(sys.executable).parent))
    assert script, "no compare-decodings beside the interpreter: run `make install` (pip install -e .)"
    done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.startswith("usage: compare-decodings ")
