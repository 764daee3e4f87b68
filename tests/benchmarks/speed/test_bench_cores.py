"""The 1-core / 2-core summaries of benchmarks/speed/bench_cores.py on hand-made inner reports."""

from benchmarks.speed import bench_cores


def _run(trainer_seconds: float, fit_seconds: float) -> dict:
    return {"report": {"identical": {"batch": [40, 26], "variants": {
        "ours-trainer": {"seconds_per_step": trainer_seconds}, "kerashub-fit": {"seconds_per_step": fit_seconds}}}}}


def test_identical_batches_give_each_steps_ratio():
    summary = bench_cores.summarise_identical({1: _run(0.56, 0.50), 2: _run(0.32, 0.25)})
    assert summary["batch"] == [40, 26]
    assert summary["variants"]["ours-trainer"] == {"seconds_per_step_1_core": 0.56, "seconds_per_step_2_cores": 0.32,
                                                   "ratio_2_vs_1": 1.75}
    assert summary["variants"]["kerashub-fit"]["ratio_2_vs_1"] == 2.0
