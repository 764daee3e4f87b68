"""The Prefect flow end to end on the bundled corpus: real Prefect (temporary local API), real
MLflow (SQLite store in the run directory), real stages; a tiny model and few steps."""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.flows.conftest import (
    REPO,
    champion_outputs,
    free_port,
    run_translation_flow,
    wait_until_it_answers,
    write_config,
)
from tests.flows.prefect_api import flow_run_logs

SCORED = 24


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One whole run of the flow; the tests below read it and run the flow again beside it."""
    tmp_path = tmp_path_factory.mktemp("flow")
    # Enough sentences to compare what is shipped with it; a guard and a length floor, decoding
    # options the export must carry in its graph for the comparison to hold.
    # Its corpus under its run_dir, as a user's run has it (the run's benchmarks read it there).
    config, result = run_translation_flow(
        tmp_path, shared_data=False, data={"train_targets": "distilled"},  # the demo's, as `make demo` trains
        evaluation={"max_sentences": SCORED, "decoding": {"repetition_guard": 4, "min_length_ratio": 0.5},
                    "attention_examples": 2})
    return tmp_path, config, result


def test_flow_runs_every_stage_and_tracks_them_in_mlflow(finished_run):
    from mlflow.tracking import MlflowClient

    tmp_path, _, result = finished_run
    run_dir = tmp_path / "run"
    work = run_dir / "runs" / result.run_id
    assert result.run_path == str(work)
    assert result.training.start_step == 0 and result.training.final_step == 12
    assert (work / "train" / "ckpt-12.index").exists()
    assert result.model.path == str(work / "averaged" / "model.keras") and Path(result.model.path).exists()
    assert (Path(result.export.directory) / "saved_model.pb").exists()
    scores = json.loads((work / "evaluation" / "scores.json").read_text())
    assert scores["bleu"]["signature"].startswith("nrefs:1")

    state = json.loads((run_dir / "mlflow_run.json").read_text())
    assert state["run_id"] == result.run_id
    client = MlflowClient(state["tracking_uri"])
    run = client.get_run(state["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.params["train.preset"] == "demo"
    assert run.data.params["data.source"] == "ddtp" and run.data.params["data.train_targets"] == "distilled"
    from pipelines.corpus import Corpus
    from pipelines.tasks.translation.distilled import distilled_targets

    corpus = Corpus.load(run_dir / "data" / "ddtp-en-de")
    assert set(corpus.lines("train", "de")) <= set(distilled_targets())
    assert {"test/bleu", "test/chrf", "test/tokenized_bleu_compound_split", "train/loss"} <= set(run.data.metrics)
    loss_history = client.get_metric_history(run.info.run_id, "train/loss")
    assert [m.step for m in loss_history] == [2, 4, 6, 8, 10, 12]
    assert run.data.tags["bleu.signature"] == scores["bleu"]["signature"]
    # How it trained: the strategy, its replicas and the precision, as the train stage returned them.
    distribution = {key: run.data.tags[f"training.{key}"] for key in ("strategy", "replicas", "workers", "precision")}
    assert distribution == {key: str(value) for key, value in result.training.distribution.items()}
    assert distribution["strategy"] in {"mirrored", "one_device"} and int(distribution["replicas"]) >= 1
    assert distribution["precision"] == "float32"
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"evaluation", "keras_model", "tokenizer", "data"} <= artifacts  # the MLflow model: its logged model's
    evaluation = {Path(a.path).name for a in client.list_artifacts(run.info.run_id, "evaluation")}
    assert {"hypotheses.txt", "references.txt", "scores.json", "sentences.json", "attention"} <= evaluation
    # What a reader opens: every test sentence with its sentence chrF and BLEU as an MLflow table, and
    # pictures, for both test splits.
    table = json.loads(Path(client.download_artifacts(run.info.run_id, "tables/sentences.json", str(work.parent)))
                       .read_text("utf-8"))
    assert len(table["data"]) == scores["evaluation"]["num_sentences"]
    assert table["columns"][:2] == ["sentence_chrf", "sentence_bleu"]
    for folder in ("evaluation/attention", "evaluation/test_unseen/attention"):
        pictures = {Path(a.path).name for a in client.list_artifacts(run.info.run_id, folder)}
        assert pictures == {"best-1.png", "best-2.png", "worst-1.png", "worst-2.png"}, folder
    # Who and what: the Prefect flow run, the code, the settings' fingerprint.
    assert run.data.tags["prefect.flow_run_id"] and run.data.tags["settings_fingerprint"] == state["fingerprint"]
    assert len(run.data.tags["mlflow.source.git.commit"]) == 40
    datasets = {d.tags[0].value: d.dataset for d in run.inputs.dataset_inputs}
    assert set(datasets) == {"train", "validation", "test", "test_unseen"}
    assert datasets["test"].name == "translation-ddtp-en-de-test"


def test_what_the_run_records_of_each_stage_is_what_the_stage_returned(finished_run):
    from flows import metric_names
    from flows.tracking import Tracker

    tmp_path, _, result = finished_run
    uri = json.loads((tmp_path / "run" / "mlflow_run.json").read_text())["tracking_uri"]
    tracker = Tracker(uri, result.run_id)
    stages = {"data": result.corpus, "vocabulary": result.vocabulary, "training": result.training,
              "averaging": result.model, "evaluation": result.evaluation, "export": result.export,
              "promotion": result.promotion}
    for name, returned in stages.items():
        assert type(returned).from_dict(tracker.logged_stage(name)) == returned, name
    run = tracker.client.get_run(result.run_id)
    metrics = run.data.metrics
    scores = {f"{split}/{name}": value for key, value in result.evaluation.metrics.items()
              for split, name in [metric_names.split_and_name(key, "test")]}
    assert {k: metrics[k] for k in scores} == scores
    assert scores["test_unseen/bleu"] == result.evaluation.metrics["test_unseen_bleu"]
    training = result.training.metrics()
    assert metrics["val/perplexity"] == pytest.approx(training["val_perplexity"])
    assert metrics["train/minutes"] == pytest.approx(training["train_minutes"])
    assert run.data.params["model.parameters"] == str(training["parameters"])
    assert result.evaluation.primary == "bleu" and result.evaluation.split == "test"


def mlflow_run_artifact(flow_run_id: str, key: str = "mlflow-run-flow-test"):
    """The markdown artifact a pipeline flow run left naming its MLflow run, read from the Prefect API."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    with get_client(sync_client=True) as prefect:
        artifacts = prefect.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]),
            key=ArtifactFilterKey(any_=[key])))
    assert len(artifacts) == 1, artifacts
    assert artifacts[0].type == "markdown" and artifacts[0].task_run_id is None  # the flow run's own
    return artifacts[0].data


def score_rows(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("| ") and not line.startswith("| score ")]


def test_the_prefect_flow_run_names_its_mlflow_run_and_scores_in_an_artifact(finished_run):
    from mlflow.tracking import MlflowClient

    tmp_path, _, result = finished_run
    uri = json.loads((tmp_path / "run" / "mlflow_run.json").read_text())["tracking_uri"]
    run = MlflowClient(uri).get_run(result.run_id)
    markdown = mlflow_run_artifact(run.data.tags["prefect.flow_run_id"])
    assert "## MLflow run finished" in markdown
    assert f"- run: `{result.run_id}`" in markdown
    assert f"- experiment: `flow-test` (id {run.info.experiment_id})" in markdown
    assert f"- tracking URI: `{uri}`" in markdown
    # A SQLite store has no UI to link to: the command that opens one on it instead.
    page = f"http://127.0.0.1:5000/#/experiments/{run.info.experiment_id}/runs/{result.run_id}" \
        "?workflowType=machine_learning"
    assert f"`make ui STORE={uri}` (or `mlflow ui --backend-store-uri {uri}`), then {page}" in markdown
    assert result.page == page  # what the command line's summary prints
    assert "](http" not in markdown
    rows = score_rows(markdown)
    metrics = result.evaluation.metrics
    assert rows[0] == f"| **test/bleu** | {metrics['bleu']:.6g} |"  # the primary score first
    assert f"| test/chrf | {metrics['chrf']:.6g} |" in rows
    assert f"| test_unseen/bleu | {metrics['test_unseen_bleu']:.6g} |" in rows
    assert any(row.startswith("| val/perplexity | ") for row in rows)
    # The run's log gives figures, not dicts of floats (each validation is the training stage's line:
    # test_cli.py, where the project's loggers reach the log as in a user's run).
    logs = flow_run_logs(run.data.tags["prefect.flow_run_id"])
    assert "{'" not in logs, [line for line in logs.splitlines() if "{'" in line]
    assert "training reached step" in logs and f"evaluation: bleu {metrics['bleu']:.4g}, " in logs
    assert f"beam_size {result.export.settings['beam_size']}, length_penalty " in logs


def test_a_failed_flow_run_names_its_failed_mlflow_run(tmp_path):
    from mlflow.tracking import MlflowClient

    from flows.translation import translation_pipeline

    path = write_config(tmp_path, shared_data=False)  # another corpus: not the worker's shared one
    with pytest.raises(Exception, match="not a directory"):
        translation_pipeline(str(path), {"data": {"source": "folder", "folder": str(tmp_path / "missing")}})
    state = json.loads((tmp_path / "run" / "mlflow_run.json").read_text())
    run = MlflowClient(state["tracking_uri"]).get_run(state["run_id"])
    assert run.info.status == "FAILED"
    markdown = mlflow_run_artifact(state["flow_run_id"])  # keyed by the experiment, as the finished one
    assert "## MLflow run failed" in markdown and f"- run: `{state['run_id']}`" in markdown
    assert "- error: DataError: " in markdown and "not a directory" in markdown
    assert not score_rows(markdown)


def test_a_tracking_server_run_gets_a_link_to_its_page_without_credentials():
    from flows.tracking import artifact_key, public_uri, run_ui_url

    # In the model-training view: MLflow 3.17's UI opens the GenAI one unless told otherwise.
    assert run_ui_url("http://127.0.0.1:5000/", "3", "abc") == \
        "http://127.0.0.1:5000/#/experiments/3/runs/abc?workflowType=machine_learning"
    assert run_ui_url("https://alice:secret@mlflow.example.org", "1", "r") == \
        "https://mlflow.example.org/#/experiments/1/runs/r?workflowType=machine_learning"
    assert run_ui_url("sqlite:////tmp/mlflow.db", "1", "r") is None
    assert public_uri("databricks") == "databricks"
    assert artifact_key("mlflow-run-Parsing_WSJ.v2") == "mlflow-run-parsing-wsj-v2"


def test_the_model_is_an_mlflow_model_registered_and_promoted(finished_run, monkeypatch):
    import mlflow.pyfunc
    import pandas as pd
    from mlflow.tracking import MlflowClient

    tmp_path, _, result = finished_run
    uri = json.loads((tmp_path / "run" / "mlflow_run.json").read_text())["tracking_uri"]
    client = MlflowClient(uri, registry_uri=uri)
    assert result.promotion.model == "flow-test"  # the tiny config's purpose: its experiment
    champion = client.get_model_version_by_alias("flow-test", "champion")
    assert champion.run_id == result.run_id or result.promotion.promoted is False
    assert result.promotion.reason == "no champion yet" and result.promotion.promoted
    # Through the environment, as a user would (mlflow.set_tracking_uri would leak into later tests).
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", uri)
    model = mlflow.pyfunc.load_model("models:/flow-test@champion")
    assert [i.name for i in model.metadata.get_input_schema().inputs] == ["source"]
    out = model.predict(pd.DataFrame({"source": ["The package contains the development files.", ""]}))
    assert list(out.columns) == ["translation"] and len(out) == 2 and isinstance(out["translation"][0], str)
    requirements = Path(mlflow.pyfunc.get_model_dependencies("models:/flow-test@champion")).read_text()
    assert "tensorflow==" in requirements and "tensorflow-text==" in requirements  # pinned, not inferred


def test_the_run_s_model_is_a_logged_model_with_its_scores_and_datasets_registered_from_it(
        finished_run, tmp_path, monkeypatch):
    """MLflow 3's view of the run, through its client API as its UI reads it: the experiment is a
    model-training one, the run's output is a logged model found by ``search_logged_models`` with the
    evaluation's scores on the datasets they were scored on, the registry's version points at it,
    and the run says in one line what it produced."""
    import mlflow
    import mlflow.artifacts
    from mlflow.tracking import MlflowClient

    from flows.pipeline import run_description
    from flows.registry import exported_uri

    run_tmp, _, result = finished_run
    uri = json.loads((run_tmp / "run" / "mlflow_run.json").read_text())["tracking_uri"]
    client = MlflowClient(uri, registry_uri=uri)
    run = client.get_run(result.run_id)
    experiment = client.get_experiment(run.info.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert run.data.tags["mlflow.note.content"] == run_description(result.evaluation, result.training,
                                                                   result.promotion)
    assert run.data.tags["mlflow.note.content"].endswith("after 12 updates; flow-test v1, champion")
    assert run.data.tags["mlflow.note.content"].startswith("test_unseen BLEU ")
    assert run.data.tags["mlflow.source.type"] == "LOCAL" and run.data.tags["mlflow.source.name"]  # the run's source

    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", uri)
    models = mlflow.search_logged_models(experiment_ids=[experiment.experiment_id], output_format="list",
                                         filter_string=f"source_run_id = '{result.run_id}'")
    assert len(models) == 1, models
    model = models[0]
    assert (model.name, model.status, model.model_type) == ("flow-test", "READY", "translation")
    assert [(o.model_id, o.step) for o in run.outputs.model_outputs] == [(model.model_id, 12)]
    assert model.params["train.preset"] == "demo"  # the run's settings, as the models table compares them
    scored = {(m.key, m.dataset_name): m.value for m in model.metrics}
    evaluation = result.evaluation.metrics
    assert scored[("test/bleu", "translation-ddtp-en-de-test")] == evaluation["bleu"]
    assert scored[("test_unseen/bleu", "translation-ddtp-en-de-test_unseen")] == evaluation["test_unseen_bleu"]
    # The scores only (no training curve, no system metric), each on the split its name begins with.
    assert len(scored) == len(evaluation) and all(key.split("/")[0] == name.rsplit("-", 1)[1] for key, name in scored)
    digests = {d.dataset.name: d.dataset.digest for d in run.inputs.dataset_inputs}
    assert {m.dataset_digest for m in model.metrics if m.key == "test/bleu"} == \
        {digests["translation-ddtp-en-de-test"]}
    # The same model, found by the dataset it was scored on and by its score.
    on_unseen = mlflow.search_logged_models(
        experiment_ids=[experiment.experiment_id], datasets=[{"dataset_name": "translation-ddtp-en-de-test_unseen"}],
        filter_string=f"metrics.`test_unseen/bleu` = {evaluation['test_unseen_bleu']}", output_format="list")
    assert [m.model_id for m in on_unseen] == [model.model_id]

    version = client.get_model_version_by_alias("flow-test", "champion")
    assert (version.source, version.run_id) == (f"models:/{model.model_id}", result.run_id)
    assert json.loads(model.tags["mlflow.modelVersions"]) == [{"name": "flow-test", "version": 1}]
    metadata = mlflow.models.get_model_info(f"models:/{model.model_id}")
    assert metadata.flavors["python_function"]["config"] == {"task": "translation"}
    assert metadata.metadata["decoding"]["repetition_guard"] == 4  # the export's record, as it was saved
    # What a later challenger evaluates the champion with, when it has no score on that one's evaluation.
    export = mlflow.artifacts.download_artifacts(artifact_uri=exported_uri(client, version), dst_path=str(tmp_path))
    assert (Path(export) / "saved_model.pb").exists()


def test_the_mlflow_model_is_saved_from_code_with_nothing_to_warn_about(finished_run, tmp_path):
    """What users load holds no pickle (MLflow's models from code, the task in ``model_config``), and
    saving it, in a fresh interpreter as the flow does, prints none of MLflow's warnings."""
    import mlflow.models

    _, _, result = finished_run
    path = tmp_path / "model"
    script = ("import logging, pathlib, sys; logging.basicConfig(level=logging.WARNING)\n"
              "from flows.registry import save_pyfunc\n"
              "save_pyfunc('translation', sys.argv[1], ['The package contains files.'], pathlib.Path(sys.argv[2]))")
    # Python's default warning filters, as the flow runs (MLflow's own pandas deprecations stay hidden).
    done = subprocess.run([sys.executable, "-c", script, result.export.directory, str(path)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    warned = [line for line in lines if "Warning" in line or ("WARNING" in line and "mlflow" in line)]
    assert warned == [], warned
    flavor = mlflow.models.Model.load(str(path)).flavors["python_function"]
    assert Path(flavor["model_code_path"]).name == "pyfunc_model.py"
    assert flavor["config"] == {"task": "translation"}  # model_config, as MLmodel spells it
    assert not list(path.rglob("*.pkl")), list(path.rglob("*.pkl"))


def test_the_export_the_registered_pyfunc_and_the_served_model_give_the_scored_translations(
        finished_run, tmp_path, monkeypatch):
    """What a user gets (the export, ``models:/...@champion`` loaded or served over HTTP) translates
    every scored sentence into exactly the string the evaluation scored."""

    from keras_transformer.decoding.export import load_exported


    run_tmp, _, result = finished_run
    evaluation = Path(result.run_path) / "evaluation"
    sources = evaluation.joinpath("sources.txt").read_text("utf-8").splitlines()
    scored = evaluation.joinpath("hypotheses.txt").read_text("utf-8").splitlines()
    assert len(sources) == len(scored) == SCORED
    # A model that says one thing whatever it reads would pass the comparison below trivially.
    assert len(set(scored)) > 1, scored
    record = json.loads(evaluation.joinpath("scores.json").read_text("utf-8"))["evaluation"]["decoding"]
    assert record["repetition_guard"] == 4 and record["min_length_ratio"] == 0.5

    export = load_exported(result.export.directory)
    assert export.decoding.repetition_guard == 4 and export.settings["constraint"] == "RepetitionGuard"
    assert export.decoding.min_length_ratio == 0.5
    # The demo's tokenizer copies URLs through: the scored translation of the source that holds one
    # (the test split's third) has it whole, put back by the decoding that every path below shares.
    assert export.settings["copies_verbatim"] is True
    url = "http://www.zdomain.com/a56/src/examples/"
    assert url in scored[next(i for i, source in enumerate(sources) if url in source)]
    assert export.translate(sources) == scored

    assert champion_outputs(run_tmp, result, "translation", sources, monkeypatch, tmp_path / "serve.log") \
        == (scored, scored)


def test_two_purposes_promote_into_two_registered_models(finished_run, tmp_path):
    """Another purpose (another config's registered model) on the same tracking store gets a
    registered model and a champion of its own; the first purpose's champion is not touched."""
    from mlflow.tracking import MlflowClient

    from flows.translation import translation_pipeline

    first_dir, config, _ = finished_run
    uri = json.loads((first_dir / "run" / "mlflow_run.json").read_text())["tracking_uri"]
    client = MlflowClient(uri, registry_uri=uri)
    before = client.get_model_version_by_alias("flow-test", "champion")
    # Its first champion is promoted on no comparison: a few sentences scored, no pictures drawn.
    other = translation_pipeline(str(config), {"run_dir": str(tmp_path / "retrain"), "tracking": {
        "tracking_uri": uri, "registered_model": "flow-test-retrain"},
        "evaluation": {"max_sentences": 4, "attention_examples": 0}})
    decision = other.promotion
    assert (decision.model, decision.promoted) == ("flow-test-retrain", True)
    assert decision.reason == "no champion yet"
    assert client.get_model_version_by_alias("flow-test-retrain", "champion").run_id == other.run_id
    after = client.get_model_version_by_alias("flow-test", "champion")
    assert (after.version, after.run_id) == (before.version, before.run_id)
    assert [v.run_id for v in client.search_model_versions("name='flow-test-retrain'")] == [other.run_id]


def test_every_config_and_deployment_purpose_has_a_registered_model_of_its_own():
    from flows.task_flows import PARSING, TRANSLATION

    purposes = {(str(path.relative_to(REPO)), "{}") for path in (REPO / "configs").rglob("*.yaml")}
    for deployment in yaml.safe_load((REPO / "prefect.yaml").read_text())["deployments"]:
        overrides = deployment["parameters"].get("overrides") or {}
        # A teacher changes how a purpose's models are trained, not the purpose: the weekly retraining
        # competes with the champion of cpu-small's registered model, which teaches it.
        overrides = {key: value for key, value in overrides.items() if key != "synthetic"}
        purposes.add((deployment["parameters"]["config_path"], json.dumps(overrides, sort_keys=True)))
    names = {}
    for path, overrides in sorted(purposes):
        load = (PARSING if path.startswith("configs/parsing") else TRANSLATION).load_config
        names[path, overrides] = load(REPO / path, json.loads(overrides)).registered_model
    assert len(set(names.values())) == len(names), names
    assert names["configs/translation/demo.yaml", "{}"] != names["configs/translation/cpu-small.yaml", "{}"]


def test_make_serve_answers_with_translations_without_an_activated_virtualenv(finished_run, tmp_path):
    """``make serve`` (what the README gives) on the champion from a shell whose PATH holds no
    virtualenv, asked over real HTTP on 127.0.0.1."""
    import urllib.request

    run_tmp, _, _ = finished_run
    uri = json.loads((run_tmp / "run" / "mlflow_run.json").read_text())["tracking_uri"]
    port = free_port()
    venv = Path(sys.executable).parent
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if Path(p) != venv)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "MLFLOW_TRACKING_URI")}
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(
        ["make", "-C", str(REPO), "serve", "MODEL=models:/flow-test@champion", f"TRACKING_URI={uri}",
         f"PORT={port}", f"VENV={venv.parent}"],
        env={**env, "PATH": path}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_it_answers(f"http://127.0.0.1:{port}/ping", server, tmp_path / "serve.log", 300)
        body = json.dumps({"dataframe_split": {"columns": ["source"],
                                               "data": [["The package contains the documentation."],
                                                        ["This is a library."]]}}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=300) as response:
            answer = json.loads(response.read())
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    predictions = answer["predictions"]
    assert len(predictions) == 2 and all(isinstance(p["translation"], str) for p in predictions)


def test_a_rerun_after_a_finished_run_retrains_in_a_new_mlflow_run_taught_by_the_champion(
        finished_run, tmp_path, monkeypatch):
    """What the weekly deployment does: the same config again, later, with ``synthetic.teacher: champion``. The
    champion's export translates the pool; the new run's vocabulary and training read the real and synthetic
    pairs, its last quarter the real pairs alone; it is scored on the champion's evaluation and competes with it."""
    from mlflow.tracking import MlflowClient

    from flows.translation import translation_pipeline
    from pipelines.corpus import Corpus
    from pipelines.tasks.translation.student import TAG
    from pipelines.training.stage import SWITCH_FILE

    first_dir, config, first = finished_run
    real = Corpus.load(first_dir / "run" / "data" / "ddtp-en-de")
    pool = tmp_path / "pool"
    pool.mkdir()
    sources = sorted({s for s, _ in real.pairs("train") if 4 <= len(s.split()) <= 12})[:30]
    (pool / "descriptions.txt").write_text("".join(f"{s}\n" for s in sources), "utf-8")
    monkeypatch.chdir(first_dir)
    first_checkpoints = sorted(p.name for p in (Path(first.run_path) / "train").iterdir())
    # Tagged (not the default) so that the synthetic pairs can be told apart in the student's corpus below.
    second = translation_pipeline(str(config), {"synthetic": {"teacher": "champion", "pool": str(pool), "tag": True,
                                                              "real_only_share": 0.25}})

    assert second.run_id != first.run_id
    assert second.training.start_step == 0 and second.training.final_step == 12  # trained afresh
    assert sorted(p.name for p in (Path(first.run_path) / "train").iterdir()) == \
        first_checkpoints  # the first run's files are untouched
    assert (first_dir / "run" / "latest").resolve() == Path(second.run_path).resolve()
    uri = json.loads((first_dir / "run" / "mlflow_run.json").read_text())["tracking_uri"]
    client = MlflowClient(uri, registry_uri=uri)
    for run_id in (first.run_id, second.run_id):
        run = client.get_run(run_id)
        assert run.info.status == "FINISHED" and "test/bleu" in run.data.metrics

    # The data were up to date (Cached in Prefect); the student's corpus and vocabulary are new.
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    flow_run_id = client.get_run(second.run_id).data.tags["prefect.flow_run_id"]
    with get_client(sync_client=True) as prefect:
        task_runs = prefect.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    states = {run.name.rsplit("-", 1)[0]: run.state.name for run in task_runs}
    assert states["prepare-data"] == "Cached"
    assert states["synthesize"] == states["mix"] == states["tokenizer"] == states["train"] == "Completed"

    # The champion taught: its translations of the pool are the run's synthetic dataset, tagged in the student's
    # corpus, whose vocabulary is its own; the last quarter of training read the real pairs alone.
    run = client.get_run(second.run_id)
    (synthetic,) = [i for i in run.inputs.dataset_inputs
                    if {t.key: t.value for t in i.tags}.get("mlflow.data.context") == "synthetic"]
    assert {t.key: t.value for t in synthetic.tags}["teacher"] == "models:/flow-test@champion"
    kept, lines = run.data.metrics["synthesis/pairs"], run.data.metrics["synthesis/pool_lines"]
    assert lines == len(sources) and kept + sum(v for k, v in run.data.metrics.items()
                                                if k.startswith("synthesis/dropped_")) == lines
    student = Corpus.load(first_dir / "run" / "data" / "student")
    assert len([s for s, _ in student.pairs("train") if s.startswith(f"{TAG} ")]) == kept
    assert student.counts["train"] == 2 * real.counts["train"] + kept
    assert second.vocabulary.source.startswith(str(first_dir / "run" / "tokenizer" / "student-"))
    switch = json.loads((Path(second.run_path) / "train" / SWITCH_FILE).read_text())
    assert switch == {"corpus": str(real.directory), "from_step": 9, "from_batch": 9}
    assert second.evaluation.identity == first.evaluation.identity  # scored as the champion was
    # The tools that read a run back (choose-alpha, the checkpoint benchmark) find each run's own vocabulary.
    from flows.tools.choose_alpha import run_files

    assert run_files(Path(second.run_path))["tokenizer"] == Path(second.vocabulary.source)
    assert run_files(Path(first.run_path))["tokenizer"] == Path(first.vocabulary.source)
    assert run_files(Path(second.run_path))["corpus_dir"] == real.directory
    taught = f"updates (taught by models:/flow-test@champion, {int(kept)} pairs); "
    assert taught in run.data.tags["mlflow.note.content"]  # the runs table tells a student from its teacher

    # The retrained model is a challenger: champion only if its BLEU is not worse on the same test.
    decision = second.promotion
    first_bleu, second_bleu = first.evaluation.metrics["bleu"], second.evaluation.metrics["bleu"]
    assert decision.champion_score == pytest.approx(first_bleu)  # the first run's recorded score
    assert decision.promoted == (second_bleu >= first_bleu)
    champion = client.get_model_version_by_alias("flow-test", "champion")
    assert str(champion.version) == str(decision.challenger_version if decision.promoted else 1)
    version = client.get_model_version("flow-test", decision.challenger_version)
    assert version.tags["promotion.promoted"] == str(decision.promoted).lower()
    assert version.tags["promotion.champion_before"] == f"v1, bleu {first_bleu:.2f}"
    assert version.tags[f"score.bleu.{decision.evaluation_key}"] == str(second_bleu)
    assert version.description.startswith(f"From run {client.get_run(second.run_id).info.run_name}: ")
    assert client.get_run(second.run_id).data.tags["promotion.promoted"] == str(decision.promoted).lower()
    # The decision is in the flow run's log, as Prefect's UI shows it.
    verdict = "promoted to champion" if decision.promoted else "not promoted"
    assert f"flow-test v{decision.challenger_version} {verdict}: {decision.reason}" in flow_run_logs(flow_run_id)


def test_the_run_benchmarks_give_back_what_the_run_shipped(finished_run):
    """``benchmarks.probes.bench_translation_checkpoints`` decodes the window the run averaged with its
    evaluation's own settings (guard, length floor) into the scored translations; ``compare-runs`` reads
    a real run's files and curves (the run against itself: nothing changed, nothing better)."""
    from benchmarks.probes import bench_translation_checkpoints
    from flows.tools import compare_runs
    from tests.commands import main_json

    _, _, result = finished_run
    run = Path(result.run_path)
    shipped = len(json.loads((run / "averaged" / "model_config.json").read_text("utf-8"))["averaged_from"])
    report = main_json(bench_translation_checkpoints.main, "--run", run, "--windows", f"1,{shipped},99",
                       "--max-sentences", 4, "--confirm-on", "test", "--trials", 50)
    assert report["evaluation_settings"]["repetition_guard"] == 4
    assert report["evaluation_settings"]["min_length_ratio"] == 0.5
    assert [r["window"] for r in report["results"]] == [1, shipped]  # 99 is skipped, not faked
    last, averaged = report["results"]
    assert averaged["shipped"] and not last["shipped"] and last["checkpoints"] == ["ckpt-12"]
    for split in ("test", "test_unseen"):
        assert averaged["paired_over_shipped"][split]["changed_sentences"] == 0
        assert averaged[split]["bleu"] == pytest.approx(averaged["paired_over_shipped"][split]["bleu"]["baseline"],
                                                        abs=1e-3)
    paired = main_json(compare_runs.main, run, run, "--trials", 50)
    assert paired["paired_run_over_base"]["test_unseen"]["changed_sentences"] == 0
    assert paired["curves"]["run"]["steps"] == 12
    assert sorted(paired["curves"]["run"]["validation_perplexity_by_step"]) == ["12", "6"]


def test_the_run_reads_in_mlflow_s_ui_as_a_team_browses_it(finished_run):
    """Through MLflow's client, what its UI shows of the run: metrics in sections by prefix and no count
    charted, params equal to what the stages used, names and descriptions set, links that work."""
    from mlflow.tracking import MlflowClient

    from flows.pipeline_config import RUN_ID

    tmp_path, _, result = finished_run
    uri = json.loads((tmp_path / "run" / "mlflow_run.json").read_text())["tracking_uri"]
    client = MlflowClient(uri, registry_uri=uri)
    run = client.get_run(result.run_id)
    sections = {key.split("/")[0] for key in run.data.metrics if "/" in key}
    assert {key for key in run.data.metrics if "/" not in key} == set(), run.data.metrics  # every one in a section
    assert {"train", "val", "test", "test_unseen", "system"} <= sections, sections
    assert {"train/loss", "train/learning_rate", "val/perplexity", "test/bleu", "test_unseen/bleu",
            "test_unseen/chrf"} <= set(run.data.metrics)
    # Counts that describe the run, not measure it: params and tags, not charts of a flat line or one dot.
    assert not [key for key in run.data.metrics if key in {"train/step", "train/parameters", "train/batches",
                                                           "val/tokens"}]
    assert run.data.params["model.parameters"] == str(result.training.parameters)
    assert run.data.tags["training.batches_per_step"] and int(run.data.tags["validation.tokens"]) > 0

    params = run.data.params
    work = Path(result.run_path)
    assert not [key for key, value in params.items() if RUN_ID in value]
    assert params["train.checkpoint_dir"] == result.training.checkpoint_dir == str(work / "train")
    assert params["averaging.checkpoint_dir"] == str(work / "train")
    assert params["averaging.output_dir"] == str(Path(result.model.path).parent) == str(work / "averaged")

    assert re.fullmatch(r"translation-demo-\d{4}-\d{6}", run.info.run_name), run.info.run_name
    flow_run_name = run.data.tags["prefect.flow_run_name"]
    assert flow_run_name == run.info.run_name  # one name in Prefect's UI and MLflow's
    url = run.data.tags.get("prefect.flow_run_url")
    assert url is None or re.match(r"https?://", url), url  # the test's temporary Prefect API has no UI
    assert run.data.tags["mlflow.note.content"]

    (model,) = [client.get_logged_model(o.model_id) for o in run.outputs.model_outputs]
    assert model.name == result.promotion.model == "flow-test"
    assert model.tags["mlflow.note.content"].startswith(f"The translation model of run {run.info.run_name}: ")
    registered = client.get_registered_model("flow-test")
    assert "translation" in registered.description and "champion" in registered.description
    version = client.get_model_version("flow-test", result.promotion.challenger_version)
    assert version.description.startswith(f"From run {run.info.run_name}: test_unseen BLEU ")
    assert version.description.endswith("The champion: no champion yet.")
    assert version.tags["promotion.promoted"] == "true" and version.tags["promotion.reason"] == "no champion yet"
    assert "promotion" not in version.tags and all(len(value) < 250 for value in version.tags.values())
    hashed = [key for key in version.tags if re.fullmatch(r"score\.[0-9a-f]+", key)]
    assert not hashed and version.tags[f"score.bleu.{result.promotion.evaluation_key}"] == \
        str(result.evaluation.score)
    assert result.promotion.evaluation_key.startswith("test.")

