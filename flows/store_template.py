"""A run_dir's new MLflow store, copied from an empty one MLflow made once for its version.

MLflow makes a new SQLite store by running every one of its schema migrations (alembic loads each as a
module): seconds on every first run in a run_dir, the same seconds each time. The flows instead copy an
empty store MLflow made once per MLflow version, kept in the user's cache folder
(``$XDG_CACHE_HOME/keras-transformer``, else ``~/.cache/keras-transformer``). The copy holds MLflow's
schema at its head revision and no experiment: MLflow adds its ``Default`` experiment when it opens
the store, with the run_dir's own artifact location, as it does on a store it made. Where the cache
cannot be written, MLflow makes the store as before.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)


def cache_dir() -> Path:
    """Where the empty stores are kept."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "keras-transformer"


def empty_store() -> Path:
    """The empty store of the installed MLflow version, made (by MLflow) if it is not there yet."""
    import mlflow
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    path = cache_dir() / f"mlflow-{mlflow.__version__}-empty.db"
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as work:
        made = Path(work) / "mlflow.db"
        store = SqlAlchemyStore(f"sqlite:///{made}", Path(work).as_uri())
        store.engine.dispose()
        with sqlite3.connect(made) as db:
            # Its Default experiment names this temporary folder; MLflow adds it again where the copy lands.
            db.execute("DELETE FROM experiments")
        db.close()
        with sqlite3.connect(made) as db:
            db.execute("VACUUM")
        db.close()
        os.replace(made, path)  # whole, even when two processes make it at once
    return path


def new_store(db_file: Path) -> bool:
    """``db_file`` made as a copy of :func:`empty_store` if it does not exist; whether it was."""
    db_file = Path(db_file)
    if db_file.exists():
        return False
    try:
        template = empty_store()
        partial = db_file.with_name(f".{db_file.name}.{os.getpid()}.partial")
        shutil.copyfile(template, partial)
        os.replace(partial, db_file)
    except (OSError, sqlite3.Error) as err:
        logger.debug("no empty MLflow store to copy (%s): MLflow makes %s", err, db_file)
        return False
    return True
