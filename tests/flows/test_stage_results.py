"""What a run records of each stage equals what the stage returned: the stage results logged
through :class:`flows.tracking.Tracker` into a real (SQLite) MLflow store and read back, their
metrics as MLflow has them, and the registry's promotion decision as its model version's tag.

The full flows check the same on a real run (``test_translation_flow.py``); this is the cheap
and exhaustive version, one of every stage result type.
"""

import json

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


def test_the_promotion_decision_is_its_model_version_s_tag(tracker):
    from flows import registry

    version = registry.register(tracker.client, "stage-results", tracker.run_id, "model", {"task": "translation"})
    decision = registry.promote(tracker.client, "stage-results", version.version, "bleu", 1.5, "key",
                                evaluate_champion=lambda champion: pytest.fail("there is no champion"))
    assert decision.promoted and decision.reason == "no champion yet" and decision.champion_version is None
    tags = tracker.client.get_model_version("stage-results", version.version).tags
    assert Promotion.from_dict(json.loads(tags["promotion"])) == decision
    assert "| champion |" not in registry.decision_markdown(decision)
