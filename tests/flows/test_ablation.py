"""The ablation flow: variants as nested MLflow runs, one table on the parent run and in Prefect."""

from __future__ import annotations

import json

import mlflow
import pytest
import yaml

from flows.ablation import ablation_flow, variant_overrides
from pipelines.config import ConfigError
from tests.flows.conftest import write_config


def write_ablation(tmp_path, variants):
    path = tmp_path / "tiny-ablation.yaml"
    path.write_text(yaml.safe_dump({"config": str(write_config(tmp_path)), "variants": variants}))
    return path


def test_variants_run_as_child_runs_and_the_table_lands_in_mlflow_and_prefect(tmp_path):
    from prefect.artifacts import Artifact

    path = write_ablation(tmp_path, [
        {"name": "ffn64", "overrides": {}},
        {"name": "ffn16", "overrides": {"train": {"model": {"d_ff": 16}}}},
    ])
    result = ablation_flow(str(path), out=str(tmp_path / "out"))

    records = result["records"]
    assert [r["name"] for r in records] == ["ffn64", "ffn16"]
    # d_ff 64 -> 16 in the one layer of each stack: two 32 x 48 kernels and 48 biases fewer each.
    assert records[0]["parameters"] - records[1]["parameters"] == 2 * (2 * 32 * 48 + 48)
    for r in records:
        assert r["steps"] == 12 and r["primary"] == "bleu" and r["bleu"] >= 0 and r["val_perplexity"] > 1
    client = mlflow.MlflowClient(result["tracking_uri"])
    parent = client.get_run(result["run_id"])
    assert parent.info.status == "FINISHED" and parent.info.run_name == "tiny-ablation"
    for r in records:
        child = client.get_run(r["mlflow_run_id"])
        assert child.data.tags["mlflow.parentRunId"] == result["run_id"]
        assert child.info.run_name == r["name"] and child.data.params["model.parameters"] == str(r["parameters"])
    # An ablation compares recipes; it never registers a model or moves a champion.
    assert not client.search_registered_models()
    table = mlflow.artifacts.load_text(f"{parent.info.artifact_uri}/ablation/table.md")
    assert "| ffn64 |" in table and "| ffn16 |" in table
    assert parent.data.metrics["bleu/ffn16"] == records[1]["bleu"]
    artifact = Artifact.get("ablation-tiny-ablation")
    rows = json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data
    assert [row["name"] for row in rows] == ["ffn64", "ffn16"]
    assert (tmp_path / "out" / "results.md").read_text().count("| ff") == 2


def test_a_bad_variant_setting_fails_before_any_variant_trains(tmp_path):
    path = write_ablation(tmp_path, [
        {"name": "fine", "overrides": {}},
        {"name": "broken", "overrides": {"train": {"model": {"num_heads": "four"}}}},
    ])
    with pytest.raises(ConfigError, match="num_heads"):
        ablation_flow(str(path), out=str(tmp_path / "out"))
    assert not (tmp_path / "out" / "results.jsonl").exists()
    assert not (tmp_path / "out" / "work").exists()
    with pytest.raises(ConfigError, match="no such variant"):
        ablation_flow(str(path), out=str(tmp_path / "out"), only=["missing"])


def test_a_variant_with_its_own_tokenizer_gets_its_own_run_dir(tmp_path):
    """Variants share one run_dir (corpus, tokenizer, caches) unless their tokenizers differ: one
    tokenizer directory would be retrained, and overwritten, at every change of variant."""
    def run_dir(variant):
        return variant_overrides({}, variant, tmp_path, minutes=None)["run_dir"]

    assert run_dir({"name": "a", "overrides": {}}) == run_dir({"name": "b", "overrides": {"input": {"x": 1}}})
    assert run_dir({"name": "c", "overrides": {"tokenizer": {"vocab_size": 900}}}) == str(tmp_path / "work-c")
