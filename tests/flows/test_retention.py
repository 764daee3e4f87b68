"""Retention on a real MLflow store (SQLite) and registry: after several runs, a champion among
the older ones, a replaced and a failed run, exactly the promised files are left."""

from __future__ import annotations

import pytest

from flows.retention import RetentionConfig, apply_retention
from flows.run_state import REPLACED_BY
from pipelines.config import ConfigError

FILES = ("train/ckpt-8.index", "averaged/model.keras", "export/saved_model.pb", "mlflow_model/MLmodel",
         "evaluation/scores.json")


@pytest.fixture(scope="module", autouse=True)
def prefect_server():
    """No Prefect here (replaces conftest's temporary API)."""
    yield


def left(run_dir, name: str) -> set[str]:
    directory = run_dir / "runs" / name
    return {f for f in FILES if (directory / f).exists()} if directory.exists() else set()


def test_retention_keeps_exactly_what_it_promises(tmp_path):
    from mlflow.tracking import MlflowClient

    run_dir = tmp_path / "run"
    uri = f"sqlite:///{run_dir.resolve() / 'mlflow.db'}"
    run_dir.mkdir()
    client = MlflowClient(uri, registry_uri=uri)
    experiment = client.create_experiment("retention", artifact_location=(run_dir / "mlartifacts").as_uri())

    def run(name: str, start: int, status: str, **tags: str) -> str:
        run_id = client.create_run(experiment, start_time=start, tags=tags, run_name=name).info.run_id
        if status != "RUNNING":
            client.set_terminated(run_id, status=status)
        for file in FILES:
            path = run_dir / "runs" / run_id / file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x" * 1000)
        return run_id

    champion = run("champion", 1, "FINISHED")
    old = run("old", 2, "FINISHED")
    recent = run("recent", 3, "FINISHED")
    killed = run("killed-and-replaced", 4, "KILLED", **{REPLACED_BY: "someone"})
    failed_replaced = run("failed-and-replaced", 5, "FAILED", **{REPLACED_BY: "someone"})
    resumable = run("failed-resumable", 6, "FAILED")
    current = run("current", 7, "FINISHED")
    stranger = run_dir / "runs" / "not-an-mlflow-run" / "train"
    stranger.mkdir(parents=True)
    client.create_registered_model("purpose")
    version = client.create_model_version("purpose", f"{client.get_run(champion).info.artifact_uri}/model",
                                          run_id=champion)
    client.set_registered_model_alias("purpose", "champion", version.version)

    done = apply_retention(run_dir, uri, current, keep_runs=2, registered_model="purpose")

    assert left(run_dir, current) == left(run_dir, recent) == set(FILES)  # the newest two finished runs
    assert left(run_dir, champion) == set(FILES) - {"train/ckpt-8.index"}  # the champion's models stay
    assert left(run_dir, old) == {"evaluation/scores.json"}
    assert not (run_dir / "runs" / killed).exists() and not (run_dir / "runs" / failed_replaced).exists()
    assert left(run_dir, resumable) == set(FILES)  # may still be resumed
    assert stranger.is_dir()  # not MLflow's: not ours to judge
    assert done["freed_bytes"] == 1000 * (1 + 4 + 5 + 5) and set(done["deleted"]) == {champion, old, killed,
                                                                                       failed_replaced}

    # keep_runs: null keeps every finished run's files; replaced runs have gone already.
    apply_retention(run_dir, uri, current, keep_runs=None, registered_model="purpose")
    assert left(run_dir, old) == {"evaluation/scores.json"} and left(run_dir, recent) == set(FILES)


def test_keep_runs_is_a_positive_number_or_null():
    assert RetentionConfig(None).keep_runs is None
    for wrong in (0, -1, 2.5):
        with pytest.raises(ConfigError, match="keep_runs"):
            RetentionConfig(wrong)
