"""``recipe-search`` (flows/tools/recipe_search.py) on one tiny variant: it runs through the ablation
flow, is tabled, and is an MLflow child of the search's run. Its wall-clock time is not asserted: the
machine's speed is not the search's to promise."""

from __future__ import annotations

import pytest
import yaml

from tests.commands import run_json
from tests.flows.conftest import harness_api


@pytest.mark.slow
def test_recipe_search_runs_a_variant_through_the_flow_and_tables_it(tmp_path):
    search = {
        "config": "configs/translation/demo.yaml",
        "evaluation": {"max_sentences": 8, "decoding": {"max_length_offset": 5}},
        "variants": [{"name": "tiny", "overrides": {
            "tokenizer": {"vocab_size": 1000, "input_sentence_size": 20000},
            "input": {"tokens_per_batch": 1024, "max_length": 48},
            "train": {"model": {"num_layers": 1, "d_model": 32, "num_heads": 2, "d_ff": 64},
                      "validation_max_batches": 2}}}],
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(search))
    # Its flows report to the test's Prefect API, with a Prefect home of their own, not the user's ~/.prefect.
    # A budget of a few steps and a short calibration: what is checked is the search's machinery.
    records = run_json("-m", "flows.tools.recipe_search", path, "--minutes", 0.05, "--calibration-steps", 4,
                       "--out", tmp_path / "out", env={"PREFECT_HOME": str(tmp_path / "prefect-home"), **harness_api()})
    (record,) = records
    assert record["name"] == "tiny" and record["steps"] > 0
    assert {"bleu", "chrf", "val_loss", "mlflow_run_id"} <= set(record)
    table = (tmp_path / "out" / "results.md").read_text()
    assert "| tiny |" in table
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'out' / 'mlflow.db'}")
    run = client.get_run(record["mlflow_run_id"])
    assert run.info.run_name == "tiny" and run.data.metrics["train/minutes"] > 0
    # The search runs on the ablation flow: the variant is a child of the search's run.
    parent = client.get_run(run.data.tags["mlflow.parentRunId"])
    assert parent.info.run_name == "tiny" and parent.info.status == "FINISHED"
