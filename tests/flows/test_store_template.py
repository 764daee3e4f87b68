"""A run_dir's new MLflow store copied from an empty one: the store MLflow would have made, the cache made once."""

import sqlite3

import pytest

from flows.store_template import empty_store, new_store


def _schema(db):
    """Tables, indexes and each table's columns, and the alembic revision. Not the SQL text: MLflow's batch
    migrations write a table's constraints in an order that differs between two stores it makes itself."""
    with sqlite3.connect(db) as connection:
        objects = set(connection.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"))
        columns = {name: sorted(connection.execute(f'PRAGMA table_info("{name}")')) for kind, name in objects
                   if kind == "table"}
        revision = connection.execute("SELECT version_num FROM alembic_version").fetchall()
    connection.close()
    return objects, columns, revision


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "keras-transformer"


def test_a_copied_store_is_the_one_mlflow_makes_and_the_template_is_made_once(tmp_path, cache):
    from mlflow.tracking import MlflowClient

    copied, made = tmp_path / "copied" / "mlflow.db", tmp_path / "made" / "mlflow.db"
    copied.parent.mkdir()
    made.parent.mkdir()
    assert new_store(copied)
    template = empty_store()
    assert template.parent == cache
    stamp = template.stat().st_mtime_ns
    MlflowClient(f"sqlite:///{made}").search_experiments()  # MLflow's own
    assert _schema(copied) == _schema(made)

    for db in (copied, made):
        client = MlflowClient(f"sqlite:///{db}", registry_uri=f"sqlite:///{db}")
        default = client.get_experiment("0")
        assert default.name == "Default" and not default.artifact_location.startswith(str(tmp_path / "cache"))
        assert client.create_experiment("mine", artifact_location=(db.parent / "mlartifacts").as_uri()) == "1"
        client.create_registered_model("model")

    second = tmp_path / "second" / "mlflow.db"
    second.parent.mkdir()
    assert new_store(second)
    assert empty_store().stat().st_mtime_ns == stamp
    with sqlite3.connect(second) as connection:
        assert connection.execute("SELECT count(*) FROM experiments").fetchone() == (0,)
    connection.close()


def test_an_existing_store_is_left_as_it_is_and_an_unwritable_cache_leaves_it_to_mlflow(tmp_path, cache):
    existing = tmp_path / "mlflow.db"
    existing.write_bytes(b"a store of its own")
    assert not new_store(existing)
    assert existing.read_bytes() == b"a store of its own"

    cache.parent.mkdir(parents=True)
    cache.write_text("a file where the cache folder would be")
    fresh = tmp_path / "fresh" / "mlflow.db"
    fresh.parent.mkdir()
    assert not new_store(fresh)
    assert not fresh.exists()
