"""The synthesize task in a Prefect flow: a registered champion as teacher, cached by its inputs, logged to MLflow."""

from __future__ import annotations

import pytest

pytest.importorskip("ctranslate2")


def test_a_champion_teaches_once_and_the_pairs_are_a_synthetic_dataset_of_the_run(tmp_path, verbatim_tokenizer):
    from mlflow.tracking import MlflowClient
    from prefect import flow

    from flows.synthesis import CONTEXT, log_synthesis_task, synthesize_task
    from flows.tracking import Tracker
    from pipelines.corpus import write_corpus
    from pipelines.tasks.translation.pool import PoolConfig
    from pipelines.tasks.translation.synthesis import SynthesisConfig, read_synthetic
    from tests.pipelines.tasks.translation.synthesis_support import PAIRS, train_teacher

    # A registered model whose champion version's export is the teacher (the pyfunc's artifact layout).
    train_teacher(verbatim_tokenizer, tmp_path / "model" / "artifacts" / "export")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri, registry_uri=uri)
    client.create_registered_model("teacher")
    version = client.create_model_version("teacher", str(tmp_path / "model"))
    run = client.create_run(client.create_experiment("synthesis", artifact_location=str(tmp_path / "artifacts")))
    tracker = Tracker(uri, run.info.run_id)

    # A run whose teacher is its own champion, before there is one: no teacher, said, and nothing synthesized.
    from flows.synthesis import student_corpus
    from flows.task_flows import TRANSLATION
    from pipelines.results import PreparedCorpus

    own = TRANSLATION.load_config(TRANSLATION.default_config, {
        "run_dir": str(tmp_path / "run"), "synthetic": {"teacher": "champion"},
        "tracking": {"registered_model": "teacher"}})

    @flow(name="first-round")
    def first_round():
        return student_corpus(own, PreparedCorpus(str(tmp_path / "en-de")), tracker)

    assert first_round() is None and not (tmp_path / "run").exists()
    client.set_registered_model_alias("teacher", "champion", version.version)

    pool = tmp_path / "pool"
    pool.mkdir()
    (pool / "lines.txt").write_text("".join(f"{s}\n" for s, _ in PAIRS), "utf-8")
    real = write_corpus(tmp_path / "en-de", "en", "de", {"train": PAIRS, "validation": [("Words.", "Wörter.")],
                                                          "test": [("Tests.", "Tests.")]}, source="t", compress=False)
    config = SynthesisConfig(teacher="models:/teacher@champion", pool=PoolConfig(source="folder", folder=str(pool)),
                             corpus=str(real.directory), output_dir=str(tmp_path / "out"), tracking_uri=uri,
                             threads=1, shard_size=4, length_ratio_coverage=1.0)

    @flow(name="synthesis-test")
    def synthesize(config):
        state = synthesize_task(config, return_state=True)
        log_synthesis_task(tracker, state.result())
        return state

    first, again = synthesize(config), synthesize(config)
    assert first.name == "Completed" and again.name == "Cached"
    result = again.result()
    assert result.kept == len(read_synthetic(result.output_dir)) >= len(PAIRS) - 2
    assert (tmp_path / "out" / "teacher" / f"teacher-v{version.version}" / "export" / "model.bin").is_file()

    logged = client.get_run(run.info.run_id)
    synthetic = [i for i in logged.inputs.dataset_inputs
                 if {t.key: t.value for t in i.tags}.get("mlflow.data.context") == CONTEXT][-1]
    tags = {t.key: t.value for t in synthetic.tags}
    assert tags["teacher"] == "models:/teacher@champion" and len(tags["teacher_weights"]) == 16
    assert synthetic.dataset.digest == result.digest and synthetic.dataset.name == "synthetic-folder"
    metrics = logged.data.metrics
    assert metrics["synthesis/pairs"] == result.kept and metrics["synthesis/pool_lines"] == len(PAIRS)
    assert {f"synthesis/dropped_{r}" for r in ("empty", "loops", "copies_source", "length_ratio")} <= set(metrics)
    assert logged.data.tags["synthesis.teacher"] == "models:/teacher@champion"


def test_a_registered_teacher_that_does_not_exist_is_one_line(tmp_path):
    from flows.synthesis import registered_export
    from pipelines.config import ConfigError
    from pipelines.textfiles import DataError

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with pytest.raises(DataError, match=r"^teacher models:/nobody@champion: no registered model 'nobody' with "
                                        r"alias 'champion' in sqlite:///\S+$"):
        registered_export("models:/nobody@champion", tmp_path, uri)
    with pytest.raises(ConfigError, match="models:/NAME@ALIAS"):
        registered_export("models:/teacher", tmp_path, uri)
    assert not (tmp_path / "teacher").exists()


def test_a_teacher_or_pool_that_is_not_there_is_one_line_naming_its_setting_before_anything_starts(tmp_path):
    from flows.preflight import check_before_start
    from flows.task_flows import TRANSLATION
    from pipelines.config import ConfigError
    from pipelines.textfiles import DataError

    binary = tmp_path / "pool"
    binary.mkdir()
    (binary / "weights.bin").write_bytes(bytes(64))

    def check(**synthetic):
        config = TRANSLATION.load_config(TRANSLATION.default_config, {"run_dir": str(tmp_path / "run"),
                                                                      "synthetic": synthetic})
        check_before_start(config, TRANSLATION.check_data)

    with pytest.raises(DataError, match=rf"^synthetic\.teacher: teacher {tmp_path}/gone: no such export directory$"):
        check(teacher=str(tmp_path / "gone"))
    with pytest.raises(ConfigError, match=r"^synthetic\.teacher=models:/teacher: .*models:/NAME@ALIAS$"):
        check(teacher="models:/teacher")
    with pytest.raises(DataError, match=r"^synthetic\.pool: \S*weights\.bin: not a text file \(a NUL byte"):
        check(teacher="champion", pool=str(binary))
    check(teacher="champion")  # the bundled pool; the champion is looked up when the run starts
    assert not (tmp_path / "run" / "data").exists()


def test_the_command_line_names_a_missing_teacher_in_one_line_and_nothing_else(tmp_path):
    """Whether a directory is an export is the model library's to say, so the check imports TensorFlow: quietly."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "flows.translation", "--set", f"run_dir={tmp_path / 'run'}",
                           "--set", f"synthetic.teacher={tmp_path / 'gone'}"], cwd=repo, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"python -m flows.translation: error: synthetic.teacher: teacher "
                                        f"{tmp_path / 'gone'}: no such export directory"], done.stderr
