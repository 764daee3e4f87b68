"""Every benchmark script runs at tiny sizes and prints what its README figures come from, so
none can rot between the occasions it is run for real. Speed is not asserted (benchmarks/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.benchmarks import load

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}


def run_json(*argv, cwd=REPO, timeout=600, env: dict[str, str] | None = None):
    done = subprocess.run([sys.executable, *map(str, argv)], cwd=cwd, env={**ENV, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    # The JSON is the last thing printed; a library may have printed lines before it.
    lines = done.stdout.splitlines()
    start = max(i for i, line in enumerate(lines) if line in ("{", "[") or line.startswith(("{", "[")))
    return json.loads("\n".join(lines[start:]))


@pytest.mark.slow
def test_learning_benchmark_compares_both_models_on_identical_batches(ddtp_corpus, tokenizer_model, tmp_path):
    report = run_json(REPO / "benchmarks" / "bench_learning_vs_kerashub.py", "--steps", 8, "--eval-every", 4,
                      "--d-model", 32, "--ffn", 64, "--layers", 1, "--heads", 2, "--batch", 8,
                      "--variants", "tied,untied", "--corpus-dir", ddtp_corpus.directory,
                      "--tokenizer", tokenizer_model, "--work-dir", tmp_path)
    assert set(report["models"]) == {"kerashub", "ours-tied", "ours-untied"}
    for entry in report["models"].values():
        assert sorted(entry["validation_loss"]) == ["4", "8"]
        assert 0 < entry["mfu"] < 1 and entry["seconds_per_step"] > 0
    assert report["models"]["kerashub"]["speed_vs_kerashub"] == 1.0
    assert report["matmul_peak_gflops"] > 0
    assert (tmp_path / "learning.png").stat().st_size > 1000


@pytest.mark.slow
def test_training_benchmark_times_every_variant_in_both_modes(ddtp_corpus, tokenizer_model, tmp_path):
    report = run_json(REPO / "benchmarks" / "bench_training_vs_kerashub.py", "--steps", 2, "--warmup", 1,
                      "--d-model", 32, "--ffn", 64, "--layers", 1, "--heads", 2, "--batch", 8,
                      "--tokens-per-step", 512, "--corpus-dir", ddtp_corpus.directory,
                      "--tokenizer", tokenizer_model, "--work-dir", tmp_path)
    identical = report["identical"]["variants"]
    assert set(identical) == {"kerashub-fit", "ours-fit", "ours-trainer"}
    assert identical["kerashub-fit"]["speed_vs_kerashub_fit"] == 1.0
    for entry in identical.values():
        assert entry["seconds_per_step"] > 0 and 0 < entry["mfu"] < 1
    natural = report["natural"]["variants"]
    # keras.io batches pad every sentence to 64 tokens; token buckets pad little.
    assert natural["kerashub-fit"]["target_padding"] > 0.3 > natural["ours-trainer"]["target_padding"]
    assert natural["ours-trainer"]["real_target_tokens_per_step"] > 0
    assert report["natural"]["real_tokens_ratio"] > 0


def test_decoding_benchmark_gives_both_searches_the_same_work():
    report = run_json(REPO / "benchmarks" / "bench_decoding_vs_kerashub.py", "--vocab-size", 300, "--d-model", 32,
                      "--ffn", 64, "--layers", 1, "--heads", 2, "--sentences", 4, "--beam-sentences", 2,
                      "--source-tokens", 5, "--output-tokens", 8, "--repeats", 1)
    for search in ("greedy", "beam4"):
        entry = report[search]
        assert entry["output_tokens"] == {"kerashub": 8, "ours": 8}
        assert entry["ours"]["seconds_per_batch"] > 0 and entry["ours_speedup"] > 0


@pytest.mark.slow
def test_recipe_search_runs_a_variant_through_the_flow_and_tables_it(tmp_path):
    search = {
        "config": "configs/translation/demo.yaml",
        "evaluation": {"max_sentences": 8, "max_length_offset": 5},
        "variants": [{"name": "tiny", "overrides": {
            "tokenizer": {"vocab_size": 1000, "input_sentence_size": 20000},
            "input": {"tokens_per_batch": 1024, "max_length": 48},
            "train": {"model": {"num_layers": 1, "d_model": 32, "num_heads": 2, "d_ff": 64},
                      "validation_max_batches": 2}}}],
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(search))
    # Its flows get a Prefect home of their own, not the user's ~/.prefect.
    records = run_json(REPO / "benchmarks" / "recipe_search.py", path, "--minutes", 0.3, "--out", tmp_path / "out",
                       env={"PREFECT_HOME": str(tmp_path / "prefect-home")})
    (record,) = records
    assert record["name"] == "tiny" and record["steps"] > 0
    # The budget (long enough for the averaging window's 3 checkpoints after ~5 s of tracing).
    assert 0.3 <= record["train_minutes"] < 0.3 + 0.1
    assert {"bleu", "chrf", "val_loss", "mlflow_run_id"} <= set(record)
    table = (tmp_path / "out" / "results.md").read_text()
    assert "| tiny |" in table
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'out' / 'mlflow.db'}")
    run = client.get_run(record["mlflow_run_id"])
    assert run.info.run_name == "tiny" and run.data.metrics["train_minutes"] >= 0.3
    # The search runs on the ablation flow: the variant is a child of the search's run.
    parent = client.get_run(run.data.tags["mlflow.parentRunId"])
    assert parent.info.run_name == "tiny" and parent.info.status == "FINISHED"


def test_baseline_tsv_holds_our_splits(ddtp_corpus, tmp_path):
    main = load("write_baseline_tsv").main
    assert main([str(ddtp_corpus.directory), str(tmp_path)]) == 0
    rows = [line.split("\t") for line in (tmp_path / "test.tsv").read_text("utf-8").splitlines()]
    assert rows == [[s, t] for s, t in ddtp_corpus.pairs("test")]
    assert len((tmp_path / "train.tsv").read_text("utf-8").splitlines()) == ddtp_corpus.counts["train"]


@pytest.mark.slow
def test_parser_wiring_check_reports_overfit_f1_and_the_source_zeroed_loss(toy_treebank, tmp_path):
    report = run_json(REPO / "benchmarks" / "bench_parser_wiring.py", "--treebank", toy_treebank, "--smoke",
                      "--model", "tagger=fused", "--output", tmp_path / "wiring.json", timeout=900)
    (result,) = report["results"]
    assert report["model_settings"] == {"tagger": "fused"}
    assert result["word_alignment"] is True and result["sentences"] == 10
    assert result["history"] and 0 <= result["overfit"]["f1"] <= 100
    # Both numbers of the check are there, and the flags are what they say.
    assert result["overfit_passed"] == (result["overfit"]["f1"] >= result["target_f1"])
    assert result["source_check_passed"] == (result["nll_source_zeroed"] > result["nll_with_source"] + 1.0)
    assert json.loads((tmp_path / "wiring.json").read_text()) == report


@pytest.mark.slow
def test_span_parser_probe_wiring_check_reports_both_numbers(toy_treebank, tmp_path):
    report = run_json(REPO / "benchmarks" / "span_parser_probe.py", "--treebank", toy_treebank, "--smoke",
                      "--output", tmp_path / "span.json", timeout=900)
    assert report["wiring"] is True and report["training"]["steps"] == 40
    assert report["train_trees"]["sentences"] == 10 and 0 <= report["train_trees"]["f1"] <= 100
    assert report["overfit_passed"] == (report["train_trees"]["f1"] >= 95.0)
    loss = report["loss"]
    assert report["source_check_passed"] == (loss["source_zeroed"] > loss["with_source"] + 1.0)
    assert json.loads((tmp_path / "span.json").read_text()) == report


@pytest.mark.slow
def test_translation_wiring_check_reports_overfit_bleu_and_the_source_zeroed_loss(ddtp_corpus, tokenizer_model,
                                                                                  tokenizer, tmp_path):
    report = run_json(REPO / "benchmarks" / "bench_translation_wiring.py", "--smoke", "--corpus-dir",
                      ddtp_corpus.directory, "--tokenizer", tokenizer_model, "--set", "input.max_length=64",
                      "--optimizer", "recipe", "--output", tmp_path / "wiring.json")
    assert report["settings"] == ["input.max_length=64"] and report["max_length"] == 64
    assert report["optimizer"] == "recipe"
    assert report["pairs"] == 10 and [h["steps"] for h in report["history"]] == [10, 20]
    assert 0 <= report["overfit"]["bleu"] <= 100 and report["overfit"]["example"]["reference"]
    # The pairs are the first training pairs that fit max_length on both sides, as training reads them.
    first = next((s, t) for s, t in ddtp_corpus.pairs("train")
                 if max(len(tokenizer.tokenize(text).numpy()) for text in (s, t)) + 1 <= 64)
    assert report["overfit"]["example"]["source"] == first[0] and report["overfit"]["example"]["reference"] == first[1]
    # Both numbers of the check are there, and the flags are what they say.
    assert report["overfit_passed"] == (report["overfit"]["bleu"] >= report["target_bleu"])
    bleu, blind = report["overfit"]["bleu"], report["bleu_source_removed"]
    assert report["source_check_passed"] == (0 < bleu and blind <= bleu / 2)
    assert report["nll_with_source"] > 0 and report["nll_source_zeroed"] > 0
    assert json.loads((tmp_path / "wiring.json").read_text()) == report


def test_adam_update_benchmark_times_both_optimizers():
    report = run_json(REPO / "benchmarks" / "bench_adam_update.py", "--preset", "demo", "--vocab-size", 500,
                      "--rounds", 2)
    assert set(report["milliseconds"]) == {"keras-adam", "fused-adam"}
    assert all(ms > 0 for ms in report["milliseconds"].values()) and report["parameters"] > 0
    assert all(len(turns) == 2 for turns in report["each_turn"].values())
