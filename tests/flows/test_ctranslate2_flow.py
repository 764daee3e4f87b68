"""A run that exports for CTranslate2: the engine's translations are scored, and served exactly."""

import json
from pathlib import Path

import pytest

from tests.flows.conftest import champion_outputs, run_translation_flow

pytest.importorskip("ctranslate2")

SCORED = 16


@pytest.fixture(scope="module")
def engine_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("ct2-flow")
    _, result = run_translation_flow(
        tmp_path, evaluation={"max_sentences": SCORED, "decoding": {"repetition_guard": 4}},
        export={"format": "ctranslate2", "quantization": "int8"},
        tracking={"registered_model": "flow-test-ct2"})
    return tmp_path, result


def test_the_engine_s_translations_are_scored_on_both_test_splits_and_promoted_on(engine_run):
    _, result = engine_run
    scored = Path(result.run_path) / "export-evaluation"
    scores = json.loads((scored / "scores.json").read_text("utf-8"))
    assert scores["evaluation"]["split"] == "test" and "test_unseen" in scores["other_splits"]
    assert scores["evaluation"]["engine"]["quantization"] == "int8"
    assert (scored / "test_unseen" / "hypotheses.txt").is_file()
    assert "looping_hypotheses" in scores["other_splits"]["test_unseen"]
    metadata = json.loads((Path(result.export.directory) / "assets.extra" / "translator.json").read_text("utf-8"))
    assert metadata["kind"] == "ctranslate2" and metadata["quantization"] == "int8"
    # The engine's options were chosen on validation among candidates around the mapped ones.
    choice = metadata["engine_choice"]
    assert choice["split"] == "validation" and len(choice["candidates"]) == 6
    assert metadata["engine"] in [c["engine"] for c in choice["candidates"]]
    assert result.export.settings["engine"] == "ctranslate2"
    # The champion was promoted on the engine's score, not the Keras model's.
    assert result.promotion.challenger_score == pytest.approx(scores["bleu"]["score"])


def test_the_registered_pyfunc_and_the_served_model_give_the_engine_s_scored_translations(
        engine_run, tmp_path, monkeypatch):
    import mlflow.pyfunc

    from flows.serving import THREADS_VARIABLE

    monkeypatch.setenv(THREADS_VARIABLE, "1")  # one engine thread a worker, as the README advises
    run_tmp, result = engine_run
    scored_dir = Path(result.run_path) / "export-evaluation"
    sources = scored_dir.joinpath("sources.txt").read_text("utf-8").splitlines()
    scored = scored_dir.joinpath("hypotheses.txt").read_text("utf-8").splitlines()
    assert len(sources) == len(scored) == SCORED and len(set(scored)) > 1, scored
    assert champion_outputs(run_tmp, result, "translation", sources, monkeypatch, tmp_path / "serve.log") \
        == (scored, scored)
    loaded = mlflow.pyfunc.load_model(f"models:/{result.promotion.model}@champion").unwrap_python_model()
    assert loaded.translator.threads == 1
