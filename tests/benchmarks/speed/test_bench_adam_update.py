"""benchmarks/speed/bench_adam_update.py at a tiny size: both optimizers timed, every turn reported."""

from __future__ import annotations

from tests.commands import run_json


def test_adam_update_benchmark_times_both_optimizers():
    report = run_json("-m", "benchmarks.speed.bench_adam_update", "--preset", "demo", "--vocab-size", 500,
                      "--rounds", 2)
    assert set(report["milliseconds"]) == {"keras-adam", "fused-adam"}
    assert all(ms > 0 for ms in report["milliseconds"].values()) and report["parameters"] > 0
    assert all(len(turns) == 2 for turns in report["each_turn"].values())
