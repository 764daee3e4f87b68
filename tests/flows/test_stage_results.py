"""What a run records of each stage equals what the stage returned: the stage results logged
through :class:`flows.tracking.Tracker` into a real (SQLite) MLflow store and read back, their
metrics as MLflow has them, and the registry's promotion decision as its model version's tag.

The full flows check the same on a real run (``test_translation_flow.py``); this is the cheap
and exhaustive version, one of every stage result type.
"""

import json
import os

import pytest

from flows.results import Promotion, RunResult
from flows.tracking import Tracker, TrackingConfig
from tests.pipelines.test_results import EVALUATION, RESULTS, TRAINING


@pytest.fixture(scope="module", autouse=True)
def prefect_server():
    """Replaces the Prefect API of ``conftest.py``: nothing here runs a flow."""
    yield


@pytest.fixture
def tracker(tmp_path):
    return Tracker.start(TrackingConfig(experiment="stage-results"), tmp_path)


def test_every_stage_result_logged_reads_back_as_the_stage_returned_it(tracker):
    for index, result in enumerate(RESULTS):
        tracker.log_stage(f"stage-{index}", result)
    for index, result in enumerate(RESULTS):
        assert type(result).from_dict(tracker.logged_stage(f"stage-{index}")) == result


def test_the_metrics_logged_with_a_stage_are_its_result_s(tracker):
    tracker.log_stage("training", TRAINING, TRAINING.metrics(), step=TRAINING.final_step)
    tracker.log_stage("evaluation", EVALUATION, EVALUATION.metrics, step=TRAINING.final_step)
    metrics = tracker.client.get_run(tracker.run_id).data.metrics
    assert metrics == {**TRAINING.metrics(), **EVALUATION.metrics}
    assert {m.step for m in tracker.client.get_metric_history(tracker.run_id, "bleu")} == {TRAINING.final_step}


def test_a_run_result_reads_back_from_the_json_the_command_line_prints():
    corpus, vocabulary, _, training, model, evaluation, export = RESULTS
    promotion = Promotion(model="m", challenger_version="2", metric="bleu", challenger_score=1.5,
                          evaluation_key="k", promoted=False, reason="bleu 1.50 < champion v1's 2.00",
                          champion_version="1", champion_score=2.0)
    result = RunResult("run", "translation", "/run/runs/run", corpus, vocabulary, training, model, evaluation,
                       export, promotion)
    assert RunResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    unexported = RunResult("run", "translation", "/run/runs/run", corpus, vocabulary, training, model, evaluation)
    assert RunResult.from_dict(json.loads(json.dumps(unexported.to_dict()))) == unexported


def logged_model(tracker):
    """A logged model of the tracker's run, without artifacts (registration only reads its entity)."""
    experiment_id = tracker.client.get_run(tracker.run_id).info.experiment_id
    return tracker.client.create_logged_model(experiment_id, name="model", source_run_id=tracker.run_id).model_id


def test_the_promotion_decision_is_its_model_version_s_tag(tracker):
    from flows import registry

    version = registry.register(tracker, "stage-results", logged_model(tracker), {"task": "translation"})
    decision = registry.promote(tracker.client, "stage-results", version.version, "bleu", 1.5, "key",
                                evaluate_champion=lambda champion: pytest.fail("there is no champion"))
    assert decision.promoted and decision.reason == "no champion yet" and decision.champion_version is None
    tags = tracker.client.get_model_version("stage-results", version.version).tags
    # Each part of the decision a short tag the registry's page shows whole (not a JSON blob it cuts).
    assert tags["promotion.promoted"] == "true" and tags["promotion.reason"] == "no champion yet"
    assert tags["promotion.champion_before"] == "none" and tags["promotion.score"] == "bleu 1.50 on key"
    assert all(len(value) <= 250 for value in tags.values()), tags
    assert "| champion |" not in registry.decision_markdown(decision)


def test_a_version_is_registered_from_its_logged_model_which_names_it(tracker, monkeypatch):
    """The registry's version points at the logged model (source ``models:/<id>``, the model's run as
    its run), the logged model lists its versions, and MLflow's default URIs are left as they were."""
    import mlflow

    from flows import registry

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///elsewhere.db")
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
    before = mlflow.get_tracking_uri()
    model_id = logged_model(tracker)
    first = registry.register(tracker, "from-logged", model_id, {"task": "translation"})
    second = registry.register(tracker, "from-logged", model_id, {"task": "translation"})
    assert (first.source, first.run_id, str(second.version)) == (f"models:/{model_id}", tracker.run_id, "2")
    assert tracker.client.get_registered_model("from-logged").tags == {"task": "translation"}
    assert json.loads(tracker.client.get_logged_model(model_id).tags["mlflow.modelVersions"]) == [
        {"name": "from-logged", "version": 1}, {"name": "from-logged", "version": 2}]  # as MLflow records them
    assert mlflow.get_tracking_uri() == before == "sqlite:///elsewhere.db"
    assert "MLFLOW_REGISTRY_URI" not in os.environ


def test_the_experiment_is_a_model_training_one_and_a_run_can_say_what_it_produced(tracker, tmp_path):
    from flows.tracking import DESCRIPTION, EXPERIMENT_KIND, MODEL_TRAINING

    experiment_id = tracker.client.get_run(tracker.run_id).info.experiment_id
    assert tracker.client.get_experiment(experiment_id).tags[EXPERIMENT_KIND] == MODEL_TRAINING == \
        "custom_model_development"  # the value MLflow 3's UI opens in its model-training view
    # An experiment made before the tag gets it; a kind someone chose in the UI stays.
    tracker.client.delete_experiment_tag(experiment_id, EXPERIMENT_KIND)
    Tracker.start(TrackingConfig(experiment="stage-results"), tmp_path)
    assert tracker.client.get_experiment(experiment_id).tags[EXPERIMENT_KIND] == MODEL_TRAINING
    tracker.client.set_experiment_tag(experiment_id, EXPERIMENT_KIND, "genai_development")
    Tracker.start(TrackingConfig(experiment="stage-results"), tmp_path)
    assert tracker.client.get_experiment(experiment_id).tags[EXPERIMENT_KIND] == "genai_development"
    tracker.describe("test BLEU 1.00 after 12 updates; not registered")
    assert tracker.client.get_run(tracker.run_id).data.tags[DESCRIPTION] == \
        "test BLEU 1.00 after 12 updates; not registered"


def test_the_run_s_description_says_its_scores_updates_and_verdict_in_one_line():
    import dataclasses

    from flows.pipeline import run_description

    unseen = dataclasses.replace(EVALUATION, metrics={**EVALUATION.metrics, "test_unseen_bleu": 0.5})
    lost = Promotion(model="m", challenger_version="2", metric="bleu", challenger_score=1.5, evaluation_key="k",
                     promoted=False, reason="", champion_version="1", champion_score=2.0)
    won = dataclasses.replace(lost, promoted=True, champion_version=None, champion_score=None)
    assert run_description(EVALUATION, TRAINING, None) == "test BLEU 1.50 after 12 updates; not registered"
    assert run_description(unseen, TRAINING, won) == "test_unseen BLEU 0.50, test BLEU 1.50 after 12 updates; " \
        "m v2, champion"
    assert run_description(EVALUATION, TRAINING, lost).endswith("m v2, not champion (v1 has 2.00)")
    assert run_description(EVALUATION, TRAINING, None, "models:/m@champion, 5 pairs") == \
        "test BLEU 1.50 after 12 updates (taught by models:/m@champion, 5 pairs); not registered"
