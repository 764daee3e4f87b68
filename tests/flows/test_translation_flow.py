"""The Prefect flow end to end on the bundled corpus: real Prefect (temporary local API), real
MLflow (SQLite store in the run directory), real stages; a tiny model and few steps."""

import json
from pathlib import Path

import pytest
import yaml

from pipelines.config import ConfigError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def prefect_server():
    """A real, temporary Prefect API and database for this module, stopped when it ends."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness():
        yield


def _write_config(tmp_path, **train):
    config = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    config["run_dir"] = str(tmp_path / "run")
    config["tokenizer"] = {"vocab_size": 1000, "input_sentence_size": 20000}
    config["input"] = {"tokens_per_batch": 1024, "max_length": 48}
    config["train"].update(
        {
            "model": {"num_layers": 1, "d_model": 32, "num_heads": 2, "d_ff": 64},
            "train_steps": 12,
            "checkpoint_every_steps": 4,
            "validate_every_steps": 6,
            "validation_max_batches": 2,
            "progress_bar": False,
            **train,
        }
    )
    config["evaluation"] = {"max_sentences": 12, "max_length_offset": 5, "batch_size": 12}
    config["tracking"] = {"experiment": "flow-test", "log_every_steps": 2}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_flow_runs_every_stage_and_tracks_them_in_mlflow(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from flows.translation import translation_pipeline

    monkeypatch.chdir(tmp_path)
    result = translation_pipeline(str(_write_config(tmp_path)))

    run_dir = tmp_path / "run"
    assert result["final_step"] == 12
    assert Path(result["model"]).name == "model.keras" and Path(result["model"]).exists()
    assert (Path(result["export"]) / "saved_model.pb").exists()
    scores = json.loads((run_dir / "evaluation" / "scores.json").read_text())
    assert scores["bleu"]["signature"].startswith("nrefs:1")

    state = json.loads((run_dir / "mlflow_run.json").read_text())
    client = MlflowClient(state["tracking_uri"])
    run = client.get_run(state["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.params["train.preset"] == "demo"
    assert run.data.params["download.source"] == "ddtp"
    assert {"bleu", "chrf", "tokenized_bleu_compound_split", "loss"} <= set(run.data.metrics)
    loss_history = client.get_metric_history(run.info.run_id, "loss")
    assert [m.step for m in loss_history] == [2, 4, 6, 8, 10, 12]
    assert run.data.tags["bleu.signature"] == scores["bleu"]["signature"]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"evaluation", "model", "tokenizer", "data"} <= artifacts
    evaluation = {Path(a.path).name for a in client.list_artifacts(run.info.run_id, "evaluation")}
    assert {"hypotheses.txt", "references.txt", "scores.json"} <= evaluation


def test_too_few_checkpoints_for_averaging_fails_before_any_work(tmp_path):
    from flows.translation import load_pipeline_config

    path = _write_config(tmp_path, train_steps=10, checkpoint_every_steps=10)
    with pytest.raises(ConfigError, match=r"train_steps=10 .*checkpoint_every_steps=10 saves 1 .*needs the last 3"):
        load_pipeline_config(path)
    assert not (tmp_path / "run").exists()


def test_unknown_setting_names_the_file_and_key(tmp_path):
    from flows.translation import load_pipeline_config

    path = tmp_path / "bad.yaml"
    path.write_text("run_dir: x\ntrain:\n  preset: demo\n  warmup_step: 10\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:train: unknown setting\(s\) \['warmup_step'\]"):
        load_pipeline_config(path)


def test_prefect_yaml_deployments_point_at_the_flow_and_existing_configs():
    from prefect.flows import load_flow_from_entrypoint

    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    names = {d["name"]: d for d in spec["deployments"]}
    assert any(d.get("schedules") for d in names.values()), "a scheduled retraining deployment"
    for deployment in names.values():
        flow = load_flow_from_entrypoint(str(REPO / deployment["entrypoint"]))
        assert flow.name == "transformer-translation"
        config = REPO / deployment["parameters"]["config_path"]
        assert config.exists(), config
        from flows.translation import load_pipeline_config

        load_pipeline_config(config)
