"""The peers' benchmarks run at tiny sizes and print what their README figures come from, so none
can rot between the occasions it is run for real. Speed is not asserted."""

from __future__ import annotations

import pytest

from benchmarks.peers import write_baseline_tsv
from tests.commands import run_json


@pytest.mark.slow
def test_learning_benchmark_compares_both_models_on_identical_batches(ddtp_corpus, tokenizer_model, tmp_path):
    report = run_json("-m", "benchmarks.peers.bench_learning_vs_kerashub", "--steps", 8, "--eval-every", 4,
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
    report = run_json("-m", "benchmarks.peers.bench_training_vs_kerashub", "--steps", 2, "--warmup", 1,
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
    report = run_json("-m", "benchmarks.peers.bench_decoding_vs_kerashub", "--vocab-size", 300, "--d-model", 32,
                      "--ffn", 64, "--layers", 1, "--heads", 2, "--sentences", 4, "--beam-sentences", 2,
                      "--source-tokens", 5, "--output-tokens", 8, "--repeats", 1)
    for search in ("greedy", "beam4"):
        entry = report[search]
        assert entry["output_tokens"] == {"kerashub": 8, "ours": 8}
        assert entry["ours"]["seconds_per_batch"] > 0 and entry["ours_speedup"] > 0


def test_baseline_tsv_holds_our_splits(ddtp_corpus, tmp_path):
    main = write_baseline_tsv.main
    assert main([str(ddtp_corpus.directory), str(tmp_path)]) == 0
    rows = [line.split("\t") for line in (tmp_path / "test.tsv").read_text("utf-8").splitlines()]
    assert rows == [[s, t] for s, t in ddtp_corpus.pairs("test")]
    assert len((tmp_path / "train.tsv").read_text("utf-8").splitlines()) == ddtp_corpus.counts["train"]
