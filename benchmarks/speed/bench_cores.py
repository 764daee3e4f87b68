"""Training throughput on 1 core and on 2 cores: how each side scales with the second core.

    python -m benchmarks.speed.bench_cores [--steps 20] [--warmup 2] [--modes natural] [--output PATH] \\
        [-- inner options]

Runs ``benchmarks.peers.bench_training_vs_kerashub --modes natural`` twice, one process after the other, with
the same arguments: under ``taskset -c 0`` (one core) and under ``taskset -c 0,1`` (two cores).
TensorFlow sizes its thread pools from the process' CPU affinity, so the pinning is all that
changes between the runs. Each run measures, interleaved in its one process, real (non-padding)
target tokens per second of keras-hub's model through ``fit``'s step (keras.io batches) and of
our training stage's step (``pipelines.training``, token buckets); see that script's docstring.

Reported per side (``ours-trainer``, ``kerashub-fit``): tokens/s and seconds per step on 1 and 2
cores and the ratio 2-core / 1-core (issue 20's goal: >= 1.8 for our trainer), the two inner
reports whole, and the tf.distribute strategy our trainer built in each run (its ``strategy:``
log line; ``strategy: auto`` resolves to ``MirroredStrategy`` over ``/cpu:0`` on a machine
without GPUs or ``TF_CONFIG``: one replica, the cores used by TensorFlow's intra-op threads).
``--modes identical,natural`` adds the inner script's fixed batches (``--batch`` sentences of
``--length`` tokens, the same batch shape every step): the ratio of each step there (``identical``:
keras-hub's and our model through ``fit``'s step, our trainer's step) tells the model's own scaling from
what real, bucketed batches of many shapes cost (the 2026-11-28 finding: 1.79x at 40 x 26 against
1.66-1.75x on real batches, ``cores-step-shapes-2026-11-28.json``).
Options not listed here (``--work-dir``, ``--corpus-dir``, ``--tokenizer``, model sizes...) go to
the inner script unchanged. Needs ``taskset`` and two cores; the machine should be otherwise idle.
"""

from __future__ import annotations

import argparse
import ast
import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import ROOT
from flows.tools.report import emit

logger = logging.getLogger("bench_cores")

INNER = "benchmarks.peers.bench_training_vs_kerashub"
CORES = {1: "0", 2: "0,1"}
SIDES = ("ours-trainer", "kerashub-fit")
GOAL = 1.8


def run_pinned(cpus: str, inner_args: list[str], modes: str = "natural") -> dict:
    """One inner run under ``taskset -c cpus``: its JSON report, strategy and wall time."""
    command = ["taskset", "-c", cpus, sys.executable, "-m", INNER, "--modes", modes, *inner_args]
    logger.info("running on cpus %s: %s", cpus, " ".join(command))
    tick = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    wall = time.perf_counter() - tick
    if done.returncode != 0:
        logger.error("inner run failed (exit %d); its log ends:\n%s", done.returncode, done.stderr[-4000:])
        raise SystemExit(done.returncode)
    report, _ = json.JSONDecoder().raw_decode(done.stdout[done.stdout.index("{"):])
    # pipelines.distribution logs "strategy: {describe_strategy(...)}" when the trainer builds it.
    found = re.findall(r"strategy: (\{.*\})", done.stderr)
    strategy = ast.literal_eval(found[-1]) if found else None
    logger.info("cpus %s done in %.0f s", cpus, wall)
    return {"cpus": cpus, "wall_seconds": round(wall, 1), "trainer_strategy": strategy, "report": report}


def summarise(runs: dict[int, dict]) -> dict:
    """Per side: tokens/s and s/step at each core count and the 2-core / 1-core ratio."""
    sides = {}
    for name in SIDES:
        one, two = (runs[n]["report"]["natural"]["variants"][name] for n in (1, 2))
        sides[name] = {
            "tokens_per_second_1_core": one["real_target_tokens_per_second"],
            "tokens_per_second_2_cores": two["real_target_tokens_per_second"],
            "ratio_2_vs_1": round(two["real_target_tokens_per_second"] / one["real_target_tokens_per_second"], 3),
            "seconds_per_step_1_core": one["seconds_per_step"],
            "seconds_per_step_2_cores": two["seconds_per_step"],
            "real_target_tokens_per_step": [one["real_target_tokens_per_step"], two["real_target_tokens_per_step"]],
        }
    return sides


def summarise_identical(runs: dict[int, dict]) -> dict:
    """Per variant of the fixed batches: seconds per step at each core count and the 1-core / 2-core ratio."""
    one, two = (runs[n]["report"]["identical"] for n in (1, 2))
    return {"batch": one["batch"], "variants": {
        name: {"seconds_per_step_1_core": v["seconds_per_step"],
               "seconds_per_step_2_cores": two["variants"][name]["seconds_per_step"],
               "ratio_2_vs_1": round(v["seconds_per_step"] / two["variants"][name]["seconds_per_step"], 3)}
        for name, v in one["variants"].items()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20, help="measured rounds per run")
    parser.add_argument("--warmup", type=int, default=2, help="rounds of tracing per run, not measured")
    parser.add_argument("--modes", default="natural", help="the inner script's modes: natural, identical or both")
    parser.add_argument("--output", type=Path, help="also write the report here")
    args, inner = parser.parse_known_args(argv)
    inner = [a for a in inner if a != "--"]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    available = sorted(os.sched_getaffinity(0))
    if not {0, 1} <= set(available):
        parser.error(f"needs cpus 0 and 1; this process may use {available}")
    inner_args = ["--steps", str(args.steps), "--warmup", str(args.warmup), *inner]
    runs = {cores: run_pinned(cpus, inner_args, args.modes) for cores, cpus in CORES.items()}

    first = runs[1]["report"]
    modes = [m for m in ("identical", "natural") if m in first]
    report = {
        "setup": {"steps": args.steps, "warmup": args.warmup, "inner_arguments": ["--modes", args.modes, *inner_args],
                  "cpus": {f"{n}_core{'s' if n > 1 else ''}": cpus for n, cpus in CORES.items()},
                  "order": "1 core, then 2 cores, one process each", "machine_cpus": os.cpu_count(),
                  "inner_setup": first["setup"], **{m: first[m].get("setup") for m in modes}},
        "tensorflow": first["tensorflow"],
        "keras": first["keras"],
        "ours_trainer_strategy_2_cores": runs[2]["trainer_strategy"],
        "goal_ours_trainer_ratio": GOAL,
    }
    if "identical" in modes:
        report["identical"] = summarise_identical(runs)
    if "natural" in modes:
        sides = summarise(runs)
        report |= {
            "sides": sides,
            "goal_met": sides["ours-trainer"]["ratio_2_vs_1"] >= GOAL,
            "real_tokens_ratio_ours_vs_kerashub": {"1_core": runs[1]["report"]["natural"]["real_tokens_ratio"],
                                                   "2_cores": runs[2]["report"]["natural"]["real_tokens_ratio"]},
        }
    report["runs"] = {f"{n}_core{'s' if n > 1 else ''}": {k: v for k, v in run.items() if k != "report"}
                      | {m: run["report"][m] for m in modes} for n, run in runs.items()}
    emit(report, args.output, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
