"""The benchmarks are a package run as ``python -m benchmarks.<group>.<module>``: grouped by what they
are for, importing each other by package, never by editing ``sys.path``; the tools they share live in
``flows/tools`` and never import a benchmark back."""

from __future__ import annotations

import importlib

import pytest

from benchmarks import ROOT

BENCHMARKS = ROOT / "benchmarks"
GROUPS = ("peers", "probes", "scale", "speed")
MODULES = sorted(f"benchmarks.{p.parent.name}.{p.stem}" for p in BENCHMARKS.glob("*/*.py") if p.stem != "__init__")


def test_no_file_under_benchmarks_edits_sys_path():
    edits = [str(p.relative_to(ROOT)) for p in BENCHMARKS.rglob("*.py") if "sys.path" in p.read_text("utf-8")]
    assert edits == []


def test_every_benchmark_is_in_a_group():
    assert [p.name for p in BENCHMARKS.glob("*.py")] == ["__init__.py"]
    assert {p.parent.name for p in BENCHMARKS.glob("*/*.py")} == set(GROUPS)
    assert all((BENCHMARKS / group / "__init__.py").is_file() for group in GROUPS)


@pytest.mark.parametrize("module", MODULES)
def test_every_benchmark_module_imports_by_its_package_name(module):
    imported = importlib.import_module(module)
    # A module with a command line can be run as `python -m`.
    if "argparse" in vars(imported):
        assert callable(imported.main)
        assert 'if __name__ == "__main__":' in (ROOT / (module.replace(".", "/") + ".py")).read_text("utf-8")


def test_the_tools_import_no_benchmark():
    tools = ROOT / "flows" / "tools"
    importing = [str(p.relative_to(ROOT)) for p in tools.rglob("*.py")
                 if any(line.lstrip().startswith(("from benchmarks", "import benchmarks"))
                        for line in p.read_text("utf-8").splitlines())]
    assert importing == []
