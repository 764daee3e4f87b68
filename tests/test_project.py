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



def module_file(module: str, repo: Path = REPO) -> Path | None:
    """The file of dotted ``module`` in ``repo`` (None: not one of its modules)."""
    base = repo.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def private_imports(path: Path, repo: Path = REPO) -> list[str]:
    """``_name``s of ``repo``'s modules that ``path`` takes from another package.

    ``from a.b import _c``, ``import a._b`` and ``b._c`` after ``from a import b`` (or ``import
    a.b as b``) all reach past a module's public surface: within its own package that is the
    package's business; across packages it ties a caller to what may change without notice.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    def package(file: Path) -> tuple[str, ...]:  # a package's __init__ belongs to it
        return file.parent.relative_to(repo).parts

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    def foreign(module: str) -> bool:
        file = module_file(module, repo)
        return file is not None and package(file) != package(path)

    found, modules = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                found.update(alias.name for i, part in enumerate(parts)
                             if private(part) and foreign(".".join(parts[: i + 1])))
                if alias.asname:
                    modules[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                is_module = module_file(dotted, repo) is not None
                if private(alias.name) and foreign(dotted if is_module else node.module):
                    found.add(dotted)
                if is_module:
                    modules[alias.asname or alias.name] = dotted
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and private(node.attr) and isinstance(node.value, ast.Name)
                and node.value.id in modules and foreign(modules[node.value.id])):
            found.add(f"{modules[node.value.id]}.{node.attr}")
    return sorted(found)


def test_no_private_names_are_imported_across_packages():
    files = [f for top in ("keras_transformer", "pipelines", "flows", "benchmarks", "tests")
             for f in sorted((REPO / top).rglob("*.py"))]
    offenders = {str(f.relative_to(REPO)): private_imports(f) for f in files}
    assert {f: names for f, names in offenders.items() if names} == {}


def test_the_private_import_check_sees_every_form(tmp_path):
    # Guard: a module reaching into another package in each way, and one into its own package.
    for name, text in {"lib/__init__.py": "", "lib/core.py": "def _helper(): pass\ndef api(): pass\n",
                       "lib/_impl.py": "", "lib/user.py": "from lib.core import _helper\n",
                       "app/__init__.py": "",
                       "app/m.py": "import lib._impl\nfrom lib.core import _helper, api\nfrom lib import core\n"
                                   "from lib import _impl as impl\nimport lib.core as c\n"
                                   "core._helper\nc._other\ncore.api\n"}.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    assert private_imports(tmp_path / "app" / "m.py", tmp_path) == [
        "lib._impl", "lib.core._helper", "lib.core._other"]
    assert private_imports(tmp_path / "lib" / "user.py", tmp_path) == []


#: Each model class and the package it lives in: only there may code ask whether a model is one.
MODEL_CLASSES = {"SpanParser": "keras_transformer/models/span_parser", "SpanParserConfig": "keras_transformer/models",
                 "Transformer": "keras_transformer/models", "TransformerConfig": "keras_transformer/models"}


def model_type_checks(path: Path, root: Path = REPO) -> list[str]:
    """``isinstance``/``issubclass`` calls in ``path`` whose class argument names a model class,
    outside that class's own package (``path`` relative to ``root``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                "isinstance", "issubclass") and len(node.args) == 2:
            names = {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node.args[1])
                     if isinstance(n, (ast.Name, ast.Attribute))}
            where = str(path.relative_to(root))
            found += [f"{where}:{node.lineno} {name}" for name in sorted(names & set(MODEL_CLASSES))
                      if not where.startswith(MODEL_CLASSES[name])]
    return found


def test_the_model_says_how_it_is_used_and_no_caller_asks_its_type():
    """Training objective, decoder and export come from the model (``model.objective``,
    ``model.decoder``, ``model.export_decoder``), not from type checks at the call sites."""
    files = [f for package in ("keras_transformer", "pipelines", "flows", "benchmarks")
             for f in sorted((REPO / package).rglob("*.py"))]
    assert [check for f in files for check in model_type_checks(f)] == []


def test_the_type_check_finder_sees_a_check(tmp_path):
    probe = tmp_path / "flows" / "probe.py"
    probe.parent.mkdir()
    probe.write_text("def f(model):\n    return isinstance(model, (SpanParser, int))\n", "utf-8")
    assert model_type_checks(probe, tmp_path) == ["flows/probe.py:2 SpanParser"]
    inside = tmp_path / "keras_transformer" / "models" / "span_parser" / "model.py"
    inside.parent.mkdir(parents=True)
    inside.write_text(probe.read_text("utf-8"), "utf-8")
    assert model_type_checks(inside, tmp_path) == []


def module_name(path: Path, root: Path = REPO) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(packages=("keras_transformer", "pipelines", "flows"), root: Path = REPO) -> dict[str, set[str]]:
    """``{module: the modules of root it imports}``, from the source: imports at module level, in
    functions and under ``TYPE_CHECKING`` alike, absolute or relative. ``from a import b`` imports
    module ``a.b`` if there is one, else a name of ``a`` (its ``__init__``)."""
    graph = {}
    for top in packages:
        for path in sorted((root / top).rglob("*.py")):
            name = module_name(path, root)
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            targets = set()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
                if isinstance(node, ast.Import):
                    targets.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                        base = ".".join(parent + ([node.module] if node.module else []))
                    submodules = {f"{base}.{alias.name}" for alias in node.names}
                    found = {m for m in submodules if module_file(m, root) is not None}
                    targets.update(found)
                    if len(found) < len(submodules):
                        targets.add(base)
            graph[name] = {t for t in targets if t != name and module_file(t, root) is not None}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per group of modules that import each other, directly or not."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph.get(module, ())):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = {stack.pop()}
            while module not in group:
                group.add(stack.pop())
            if len(group) > 1:
                groups.append(group)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    cycles = []
    for group in groups:
        start = min(group)
        paths = {start: [start]}
        queue = [start]
        while queue:  # the shortest way round from start, inside the group
            module = queue.pop(0)
            for other in sorted(graph[module] & group):
                if other == start:
                    cycles.append([*paths[module], start])
                    queue = []
                    break
                if other not in paths:
                    paths[other] = [*paths[module], other]
                    queue.append(other)
    return sorted(cycles)


def test_no_module_imports_itself_through_others():
    """A circle of imports is a name in the wrong module; an import hidden in a function keeps the
    circle (it only moves the failure to whoever calls first)."""
    cycles = import_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_cycle_check_sees_every_form_of_import(tmp_path):
    # Guard: a circle through a function's import, one through a relative import and the package's
    # __init__, and a package importing its own submodules (no circle).
    for name, text in {"lib/__init__.py": "from lib.core import api\n",
                       "lib/core.py": "def api():\n    from lib import helpers\n",
                       "lib/helpers.py": "from .core import api\n",
                       "lib/user.py": "from . import helpers\n",
                       "app/__init__.py": "",
                       "app/a.py": "from app.b import x\n",
                       "app/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app import a\n",
                       "tidy/__init__.py": "from tidy.one import f\n",
                       "tidy/one.py": "from tidy import two\n",
                       "tidy/two.py": "import os\n"}.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(("lib", "app", "tidy"), tmp_path)
    assert graph["lib.user"] == {"lib.helpers"} and graph["tidy.one"] == {"tidy.two"}
    assert import_cycles(graph) == [["app.a", "app.b", "app.a"], ["lib.core", "lib.helpers", "lib.core"]]


def test_the_workers_get_the_longest_test_files_first(request):
    """tests/file_order.py: the collection is ordered by the durations table, longest file first, and
    ``make test`` keeps xdist from ordering it again by the number of tests in a file."""
    import json

    from tests.file_order import DURATIONS

    known = json.loads(DURATIONS.read_text(encoding="utf-8"))
    assert known and all((REPO / name).is_file() for name in known), [n for n in known if not (REPO / n).is_file()]
    files = list(dict.fromkeys(item.nodeid.split("::")[0] for item in request.session.items))
    timed = [known[name] for name in files if name in known]
    if len(timed) > 1:  # a run of more than one timed file
        assert timed == sorted(timed, reverse=True), files
    assert "--dist loadfile --no-loadscope-reorder" in (REPO / "Makefile").read_text(encoding="utf-8")
