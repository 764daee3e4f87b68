"""House rules a reviewer would otherwise check by hand: layering and lint."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Dependencies point one way: flows -> pipelines -> keras_transformer. The model library is
# usable in a notebook without orchestration or tracking installed.
FORBIDDEN = {
    "keras_transformer": {"pipelines", "flows", "prefect", "mlflow"},
    "pipelines": {"flows", "prefect", "mlflow"},
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_dependencies_point_one_way(package):
    files = sorted((REPO / package).rglob("*.py"))
    assert files
    offenders = {
        str(f.relative_to(REPO)): sorted(imported_modules(f) & FORBIDDEN[package]) for f in files
    }
    assert {f: names for f, names in offenders.items() if names} == {}


def test_the_layering_check_sees_imports(tmp_path):
    # Guard: the parser finds both import forms, or the test above could never fail.
    module = tmp_path / "m.py"
    module.write_text("import mlflow.tracking\nfrom prefect import flow\nfrom . import x\n")
    assert imported_modules(module) == {"mlflow", "prefect"}


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is a test dependency (pip install -e '.[test]')"
    result = subprocess.run([ruff, "check", "--no-cache", "."], cwd=REPO, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stdout[-4000:]


def imported_names(path: Path) -> set[str]:
    """Full dotted names of the absolute imports of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_tasks_sit_on_the_engine_and_not_on_each_other():
    tasks = REPO / "pipelines" / "tasks"
    task_names = sorted(p.name for p in tasks.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert task_names == ["parsing", "translation"]
    offenders = {}
    for path in sorted((REPO / "pipelines").rglob("*.py")):
        relative = path.relative_to(REPO / "pipelines").parts
        own = relative[1] if relative[0] == "tasks" and len(relative) > 2 else None
        engine = relative[0] != "tasks"
        bad = {name for name in imported_names(path) if name.startswith("pipelines.tasks.")
               and (engine or name.split(".")[2] not in (own, "base"))}
        if bad:
            offenders[str(path.relative_to(REPO))] = sorted(bad)
    assert offenders == {}
