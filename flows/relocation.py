"""A run directory copied or moved to another path: its MLflow store follows it.

A ``run_dir``'s local store is ``<run_dir>/mlflow.db`` with its artifacts under
``<run_dir>/mlartifacts`` (:meth:`flows.tracking.Tracker.start`). MLflow records absolute
locations in the store: each experiment's artifact root, each run's artifact URI, each logged
model's and each registered model version's storage location, each dataset's source. A copy
(``cp -r``) or a move (``mv``) of the run_dir would go on reading and writing the old place, or
fail once it is gone. MLflow has no API that changes them (an experiment's artifact location is
fixed at its creation: mlflow/mlflow#3144, #8226), so :func:`relocate_store` rewrites them from
the old run_dir's prefix to the new one's, through MLflow's own table models and store (which
brings an older store's schema up to date first), in one transaction.

The old place is what the store's experiments name as their artifact root,
``<old run_dir>/mlartifacts``. The flows relocate a run_dir's store whenever they open it;
``make serve`` does before serving from one, and so does ``python -m flows.relocation TRACKING_URI``.
Nothing under the old path is read or written, so it may be gone.
"""

from __future__ import annotations

import argparse
import logging
import sys
import urllib.parse
from pathlib import Path

logger = logging.getLogger(__name__)

#: The store's file and artifact folder inside a run_dir.
STORE_FILE, ARTIFACTS = "mlflow.db", "mlartifacts"


def store_uri(run_dir: Path) -> str:
    """The tracking URI of ``run_dir``'s own store."""
    return f"sqlite:///{Path(run_dir).resolve() / STORE_FILE}"


def local_run_dir(uri: str) -> Path | None:
    """The run_dir whose own store ``uri`` is (``sqlite:///<run_dir>/mlflow.db``, a relative path
    taken from the working directory), None for any other store."""
    if not uri.startswith("sqlite:///"):
        return None
    path = Path(urllib.parse.unquote(uri[len("sqlite:///"):].split("?", 1)[0]))
    return path.resolve().parent if path.name == STORE_FILE else None


def _prefixes(root: Path) -> list[str]:
    """The forms a location under ``root`` takes in the store: a file URI, a path."""
    return [root.as_uri() + "/", f"{root}/"]


def _old_roots(session, run_dir: Path) -> list[Path]:
    """The run_dirs other than ``run_dir`` that the store's experiments keep their artifacts in."""
    from mlflow.store.tracking.dbmodels.models import SqlExperiment
    from mlflow.utils.file_utils import local_file_uri_to_path
    from mlflow.utils.uri import is_local_uri

    roots = set()
    for (location,) in session.query(SqlExperiment.artifact_location):
        if not location or not is_local_uri(location):
            continue
        path = Path(local_file_uri_to_path(location))
        if path.name == ARTIFACTS and path.is_absolute() and path.parent != run_dir:
            roots.add(path.parent)
    return sorted(roots)


def _rebase(session, column, old: str, new: str) -> int:
    """Rows whose ``column`` starts with ``old`` get ``new`` in its place; their count."""
    from sqlalchemy import String, func, literal

    rest = func.substr(column, len(old) + 1, type_=String)
    return session.query(column.class_).filter(func.substr(column, 1, len(old)) == old).update(
        {column: literal(new, String).concat(rest)}, synchronize_session=False)


def _replace_within(session, column, old: str, new: str) -> int:
    """Rows whose ``column`` holds ``old`` (a JSON string's start) get ``new`` for it; their count."""
    from sqlalchemy import func

    return session.query(column.class_).filter(func.instr(column, old) > 0).update(
        {column: func.replace(column, old, new)}, synchronize_session=False)


def relocate_store(run_dir: Path) -> list[Path]:
    """Rewrites the locations ``<run_dir>/mlflow.db`` records under an earlier path of the run_dir
    to the same places under ``run_dir``; returns the earlier paths (none: nothing to do)."""
    from mlflow.store.model_registry.dbmodels.models import SqlModelVersion
    from mlflow.store.tracking.dbmodels.models import SqlDataset, SqlExperiment, SqlLoggedModel, SqlRun
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    run_dir = Path(run_dir).resolve()
    if not (run_dir / STORE_FILE).is_file():
        return []
    store = SqlAlchemyStore(store_uri(run_dir), (run_dir / ARTIFACTS).as_uri())
    with store.ManagedSessionMaker() as session:
        roots = _old_roots(session, run_dir)
        for root in roots:
            counts = {}
            for old, new in zip(_prefixes(root), _prefixes(run_dir)):
                for column in (SqlExperiment.artifact_location, SqlRun.artifact_uri, SqlLoggedModel.artifact_location,
                               SqlModelVersion.storage_location, SqlModelVersion.source):
                    counts[column.key] = counts.get(column.key, 0) + _rebase(session, column, old, new)
                counts["dataset_source"] = counts.get("dataset_source", 0) + _replace_within(
                    session, SqlDataset.dataset_source, f'"{old}', f'"{new}')
            logger.info("run_dir moved from %s to %s: its MLflow store's locations rewritten (%s)", root, run_dir,
                        ", ".join(f"{count} {name}" for name, count in counts.items() if count))
    return roots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flows.relocation",
        description="Make a copied or moved run_dir's MLflow store (sqlite:///<run_dir>/mlflow.db) name its "
                    "artifacts under the run_dir's present path; any other tracking URI is left as it is.")
    parser.add_argument("tracking_uri", help="the store, e.g. sqlite:///runs/cpu-small/mlflow.db")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    run_dir = local_run_dir(args.tracking_uri)
    if run_dir is not None:
        relocate_store(run_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
