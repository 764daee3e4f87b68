"""The translation flow's resume after a kill and its settings checks: what fails before any work
(checkpoint counts, splits, run_dir and state files, unknown keys) and the deployments' file."""


import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pipelines.config import ConfigError
from tests.flows.conftest import DEMO, REPO, harness_api, write_config


def latest_step(train_dir: Path) -> int:
    """The step of the checkpoint a resume would start from (what the trainer looks up)."""
    import tensorflow as tf

    latest = tf.train.latest_checkpoint(str(train_dir)) if train_dir.exists() else None
    return int(latest.rsplit("-", 1)[1]) if latest else 0


def test_a_killed_flow_resumes_its_mlflow_run_from_the_last_checkpoint(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from flows.translation import translation_pipeline

    config = write_config(tmp_path, train_steps=40, checkpoint_every_steps=8)
    # tests/flows/freeze stops the run right after its checkpoint of step 8 and says so in a marker
    # file: the kill waits for that event, not for a time, and lands with 32 steps left to resume.
    marker = tmp_path / "frozen-after-checkpoint"
    # The worker's Prefect API records the killed flow run, as a team's server would; the rerun here reports to it.
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), **harness_api(),
           "PYTHONPATH": f"{REPO / 'tests' / 'flows' / 'freeze'}{os.pathsep}{REPO}",
           "FREEZE_AFTER_CHECKPOINT": str(marker), "FREEZE_AFTER_CHECKPOINT_STEP": "8"}
    # Its own session: SIGKILL reaches whatever the flow started.
    log = tmp_path / "killed_flow.log"
    with log.open("wb") as output:
        process = subprocess.Popen([sys.executable, "-m", "flows.translation", "--config", str(config)],
                                   cwd=tmp_path, env=env, start_new_session=True,
                                   stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 1800  # a safety net for a hung run, not a race with its work
        while not marker.exists():
            assert process.poll() is None and time.monotonic() < deadline, \
                f"no checkpoint 8 while the flow ran:\n{log.read_text(errors='replace')[-4000:]}"
            time.sleep(0.2)
        assert marker.read_text().split()[1].endswith("ckpt-8")
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    state = json.loads((tmp_path / "run" / "mlflow_run.json").read_text())
    client = MlflowClient(state["tracking_uri"])
    assert client.get_run(state["run_id"]).info.status == "RUNNING"  # nobody could end it
    resumable = latest_step(tmp_path / "run" / "runs" / state["run_id"] / "train")
    assert resumable == 8

    # The rerun changes a setting: the continued run records that it did.
    changed = yaml.safe_load(config.read_text())
    changed["evaluation"]["max_sentences"] = 10
    config.write_text(yaml.safe_dump(changed))
    monkeypatch.chdir(tmp_path)
    result = translation_pipeline(str(config))
    assert result.run_id == state["run_id"]  # the same MLflow run, continued
    assert result.training.start_step == resumable and result.training.final_step == 40
    run = client.get_run(state["run_id"])
    assert run.info.status == "FINISHED" and "test/bleu" in run.data.metrics
    assert json.loads(run.data.tags["changed_on_resume"]) == {"evaluation.max_sentences": ["12", "10"]}
    # Every step once, though the steps after the resumed checkpoint were trained twice.
    assert sorted(m.step for m in client.get_metric_history(state["run_id"], "train/loss")) == list(range(2, 41, 2))
    assert len(list(client.search_runs([run.info.experiment_id]))) == 1


def test_too_few_checkpoints_for_averaging_fails_before_any_work(tmp_path):
    from flows.task_flows import TRANSLATION

    path = write_config(tmp_path, train_steps=10, checkpoint_every_steps=10, train_minutes=0)
    with pytest.raises(ConfigError, match=r"train_steps=10 .*checkpoint_every_steps=10 saves 1 .*needs the last 3"):
        TRANSLATION.load_config(path)
    assert not (tmp_path / "run").exists()


def test_a_time_budget_needs_no_checkpoint_count_check(tmp_path):
    from flows.task_flows import TRANSLATION

    # Under a budget the trainer saves the averaging checkpoints in the run's final stretch.
    path = write_config(tmp_path, train_steps=10, checkpoint_every_steps=10, train_minutes=1)
    assert TRANSLATION.load_config(path).train.resolved().train_minutes == 1


def test_an_explicit_checkpoint_dir_is_kept_even_if_it_is_the_stage_default(tmp_path):
    from flows.task_flows import TRANSLATION

    config = TRANSLATION.load_config(DEMO, {"train": {"checkpoint_dir": "runs/train"}})
    assert config.train.checkpoint_dir == "runs/train"
    assert config.run_paths("abc").train == Path("runs/train")


def test_run_dir_override_moves_every_path(tmp_path):
    from flows.pipeline import RUN_ID
    from flows.task_flows import TRANSLATION

    config = TRANSLATION.load_config(DEMO, {"run_dir": str(tmp_path / "elsewhere")})
    moved = tmp_path / "elsewhere"
    assert Path(config.data.output_dir).parent == moved / "data"
    assert Path(config.input.cache_dir) == moved / "cache"
    assert Path(config.train.checkpoint_dir) == moved / "runs" / RUN_ID / "train"
    assert config.tokenizer_dir == moved / "tokenizer"


def test_a_misspelt_evaluation_split_fails_before_training(tmp_path):
    from flows.task_flows import TRANSLATION

    path = write_config(tmp_path)
    config = yaml.safe_load(path.read_text())
    config["evaluation"]["split"] = "tset"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=r"pipeline.yaml:\d+: evaluation: .*split='tset': must be one of "):
        TRANSLATION.load_config(path)


def test_a_damaged_state_file_or_unusable_run_dir_fails_with_its_name(tmp_path):
    from flows.translation import translation_pipeline

    path = write_config(tmp_path)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "mlflow_run.json").write_text('{"run_id": "abc')  # a write cut short
    with pytest.raises(ConfigError, match=r"mlflow_run.json is damaged .*delete it"):
        translation_pipeline(str(path))
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match=r"run_dir='.*a-file/run': cannot create it"):
        translation_pipeline(str(path), {"run_dir": str(blocker / "run")})
    assert not (tmp_path / "run" / "runs").exists()  # no work was done


def test_unknown_setting_names_the_file_and_key(tmp_path):
    from flows.task_flows import TRANSLATION

    path = tmp_path / "bad.yaml"
    path.write_text("run_dir: x\ntrain:\n  preset: demo\n  warmup_step: 10\n")
    with pytest.raises(ConfigError, match=r"^\S*bad.yaml:4: train.warmup_step: unknown setting of TrainConfig; "
                                          r"did you mean train.warmup_steps\?$"):
        TRANSLATION.load_config(path)
    # A setting given on the command line is named as such, with the closest known key.
    from flows.pipeline_config import load_pipeline_config as load
    from flows.task_flows import TranslationPipelineConfig

    with pytest.raises(ConfigError, match=r"^--set train.warmup_stepz: unknown setting of TrainConfig; "
                                          r"did you mean train.warmup_steps\?$"):
        load(TranslationPipelineConfig, DEMO, {"train": {"warmup_stepz": 10}}, overrides_source="--set")
    with pytest.raises(ConfigError, match=r"^--set trian: unknown setting of TranslationPipelineConfig; "
                                          r"did you mean train\?$"):
        load(TranslationPipelineConfig, DEMO, {"trian": {"train_steps": 10}}, overrides_source="--set")


def test_prefect_yaml_deployments_point_at_the_flow_and_existing_configs():
    from prefect.flows import load_flow_from_entrypoint

    from flows.task_flows import TASK_FLOWS

    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    names = {d["name"]: d for d in spec["deployments"]}
    assert any(d.get("schedules") for d in names.values()), "a scheduled retraining deployment"
    for deployment in names.values():
        flow = load_flow_from_entrypoint(str(REPO / deployment["entrypoint"]))
        assert flow.name in ("transformer-translation", "transformer-parsing")
        config = REPO / deployment["parameters"]["config_path"]
        assert config.exists(), config
        overrides = deployment["parameters"].get("overrides")
        loaded = TASK_FLOWS[flow.name.removeprefix("transformer-")].load_config(config, overrides)
        if deployment.get("schedules"):  # each round of the retraining learns from the last one's champion
            assert loaded.synthetic.teacher == "champion"
    # Both shipped language pairs and the parsing task are deployed, each in a run_dir of its own.
    problems = {(d["parameters"].get("overrides") or {}).get("data", {}).get("language_pair", "en-de")
                for d in names.values() if "translation" in d["entrypoint"]}
    assert {"en-de", "en-fr"} <= problems and "parsing-sample" in names
    run_dirs = [(d["parameters"].get("overrides") or {}).get("run_dir", d["parameters"]["config_path"])
                for d in names.values()]
    assert len(set(run_dirs)) == len(run_dirs)


def test_sentence_pairs_is_a_translation_setting(tmp_path):
    from flows.task_flows import PARSING, TRANSLATION

    root = Path(__file__).resolve().parents[2]

    overrides = {"run_dir": str(tmp_path / "run"), "input": {"sentence_pairs": "only"}}
    assert TRANSLATION.load_config(root / "configs/translation/demo.yaml", overrides).input.sentence_pairs == "only"
    with pytest.raises(ConfigError, match=r"input.sentence_pairs='only': .*parsing task's pairs are not paragraphs"):
        PARSING.load_config(root / "configs/parsing/sample-cpu.yaml", overrides)
    assert not (tmp_path / "run").exists()
