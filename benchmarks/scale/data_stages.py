"""The translation flow's data stages at the paper's data size, by simulation (issue 60).

    python -m benchmarks.scale.data_stages [--sizes 30000,300000,1200000,4500000] [--paper-size 1200000] \\
        [--work-dir DIR] [--output benchmarks/results/scale-data-stages-DATE.json] [--smoke] \\
        [--stages input --merge]

For each size N, a synthetic folder corpus of N pairs (:mod:`.synthetic`: two bundled En-De
pairs joined, every line distinct) goes through the stages of ``configs/translation/cpu-small.yaml``
with ``data.source: folder`` (:mod:`.stages`: prepare, vocabulary, token cache, input pipeline,
a few training steps), each stage in a process of its own. Per stage: wall seconds, the peak
resident memory of its process tree (sampled every 0.2 s; the cache's worker processes included)
and of its main process alone (``wait4``), the bytes it added under the work directory, and the
ratio of each to the same stage at the previous size (the issue asks for N/4; the sizes are
30k, 300k, 1.2M, 4.5M: x10, x4, x3.75). At ``--one-core-sizes`` the token cache is built again
under ``taskset -c 0`` (one core; the cache writes one process per usable core): the two-core
rate over the one-core rate. At ``--paper-size`` the paper's configuration
(``configs/translation/wmt14-en-de-base.yaml``: a shared 37k vocabulary, the base model, 25,000
target tokens a step by accumulation) runs the same stages on the same prepared corpus and
``--paper-steps`` training steps: that a GPU user's first run reaches training.

The report is rewritten after every stage, so a long run's finished sizes are kept. Timings are
of the machine as it was (its load average is recorded with each stage, ``machine_at_last_stage``;
``timings`` says so): the ratios between sizes are what the targets are about. ``--stages`` with
``--merge`` measures some stages again on an earlier run's work directory into its report.
``--smoke`` runs two tiny sizes with a small vocabulary, for the test suite.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import ROOT
from flows.tools.process_memory import tree_rss_bytes
from flows.tools.report import emit, machine

logger = logging.getLogger("benchmarks.scale.data_stages")

CPU_SMALL = "configs/translation/cpu-small.yaml"
PAPER = "configs/translation/wmt14-en-de-base.yaml"
STAGES = ("prepare", "vocabulary", "cache", "input", "train")
#: From 1.2M to 4.5M pairs (x3.75): each stage's time at most x4.5 and its peak memory at most x1.5;
#: the token cache's rate on every core at least x1.7 one core's; the input pipeline's rate.
TARGETS = {"time_ratio": 4.5, "memory_ratio": 1.5, "cache_core_ratio": 1.7, "input_target_tokens_per_second": 400_000}
SMOKE_SETTINGS = ["tokenizer.vocab_size=600", "input.tokens_per_batch=256", "input.max_length=64",
                  "train.model.num_layers=1", "train.model.d_model=32", "train.model.num_heads=2",
                  "train.model.d_ff=64", "train.tokens_per_step=256"]


def tree_size(path: Path) -> int:
    """Bytes of the files under ``path``."""
    total = 0
    for directory, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_size
            except FileNotFoundError:  # a temporary renamed meanwhile
                pass
    return total


def measure(command: list[str], work_dir: Path, log_path: Path) -> dict[str, Any]:
    """Runs ``command``; its wall seconds, peak RSS (process tree, and its own) and bytes added under ``work_dir``."""
    before = tree_size(work_dir)
    peak = 0
    with open(log_path, "ab") as log:
        tick = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2"})
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(0.2):
                peak = max(peak, tree_rss_bytes(process.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - tick
        done.set()
        sampler.join()
        process.returncode = os.waitstatus_to_exitcode(status)
    return {"seconds": round(seconds, 1), "peak_rss_mb": round(max(peak, usage.ru_maxrss * 1024) / 2**20),
            "peak_rss_main_process_mb": round(usage.ru_maxrss / 1024),
            "disk_written_mb": round((tree_size(work_dir) - before) / 2**20, 1), "exit_code": process.returncode}


class Report:
    """The JSON report, rewritten at ``output`` after each stage."""

    def __init__(self, output: Path, args: argparse.Namespace):
        self.output = output
        arguments = {k: v for k, v in vars(args).items() if k != "output"}
        if args.merge and output.is_file():  # a later run's stages replace the same stages of the earlier ones
            self.data = json.loads(output.read_text(encoding="utf-8"))
            self.data.setdefault("later_runs", []).append({"date": datetime.date.today().isoformat(),
                                                           "arguments": arguments})
            return
        self.data: dict[str, Any] = {
            "benchmark": "benchmarks.scale.data_stages", "issue": 60,
            "date": datetime.date.today().isoformat(),
            "timings": "seconds on this machine as it was, its load average recorded at each stage "
                       "(machine_at_last_stage); the ratios between sizes are what the targets concern",
            "config": CPU_SMALL, "paper_config": PAPER, "targets": TARGETS, "sizes": {}, "paper": {},
            "arguments": arguments}

    def stage(self, section: dict, name: str, figures: dict[str, Any]) -> None:
        section[name] = figures
        self.save()

    def save(self) -> None:
        self.data["machine_at_last_stage"] = machine()
        self.data["summary"] = summarise(self.data)
        self.output.parent.mkdir(parents=True, exist_ok=True)
        self.output.write_text(json.dumps(self.data, indent=2, default=str) + "\n", encoding="utf-8")


def summarise(data: dict[str, Any]) -> dict[str, Any]:
    """Each stage's ratios to the previous size, and each target met or not (where measured)."""
    sizes = sorted(data["sizes"], key=int)
    ratios: dict[str, Any] = {}
    for smaller, larger in zip(sizes, sizes[1:]):
        entry = {"size_ratio": round(int(larger) / int(smaller), 2)}
        for stage in STAGES:
            a, b = data["sizes"][smaller].get(stage), data["sizes"][larger].get(stage)
            if a and b and a.get("exit_code") == 0 and b.get("exit_code") == 0:
                entry[stage] = {"time": round(b["seconds"] / max(a["seconds"], 0.1), 2),
                                "peak_rss": round(b["peak_rss_mb"] / max(a["peak_rss_mb"], 1), 2),
                                "disk": round(b["disk_written_mb"] / a["disk_written_mb"], 2)
                                if a["disk_written_mb"] > 0 else None}
        ratios[f"{smaller}->{larger}"] = entry
    verdict: dict[str, Any] = {}
    last = ratios.get("1200000->4500000")
    if last:
        verdict["time_ratio_1.2M_to_4.5M_within_4.5x"] = {
            stage: r["time"] <= TARGETS["time_ratio"] for stage, r in last.items() if isinstance(r, dict)}
        verdict["peak_rss_ratio_1.2M_to_4.5M_within_1.5x"] = {
            stage: r["peak_rss"] <= TARGETS["memory_ratio"] for stage, r in last.items() if isinstance(r, dict)}
    cores = {size: entry["cache_one_core"]["core_ratio"] for size, entry in data["sizes"].items()
             if entry.get("cache_one_core", {}).get("core_ratio")}
    if cores:
        verdict["cache_core_ratio_at_least_1.7"] = {size: ratio >= TARGETS["cache_core_ratio"]
                                                    for size, ratio in cores.items()}
    rates = {size: entry["input"]["stage"]["target_tokens_per_second"] for size, entry in data["sizes"].items()
             if entry.get("input", {}).get("stage", {}).get("target_tokens_per_second")}
    if rates:
        verdict["input_at_least_400k_target_tokens_per_second"] = {
            size: rate >= TARGETS["input_target_tokens_per_second"] for size, rate in rates.items()}
    return {"ratios_to_previous_size": ratios, "targets_met": verdict}


def run_stages(report: Report, section: dict, label: str, config: str, settings: list[str], work_dir: Path,
               stages: tuple[str, ...], extra: list[str] | None = None) -> bool:
    """Each of ``stages`` in its own measured process; False once one fails (the rest are skipped)."""
    for stage in stages:
        result_path = work_dir / f"{stage}.result.json"
        command = [sys.executable, "-m", "benchmarks.scale.stages", stage, "--config", config,
                   "--result", str(result_path), *[a for s in settings for a in ("--set", s)], *(extra or [])]
        logger.info("%s: %s", label, stage)
        figures = measure(command, work_dir, work_dir / "stages.log")
        if result_path.is_file():
            figures["stage"] = json.loads(result_path.read_text(encoding="utf-8"))
        report.stage(section, stage, figures)
        logger.info("%s %s: %s", label, stage, {k: v for k, v in figures.items() if k != "stage"})
        if figures["exit_code"] != 0:
            logger.error("%s failed; its log: %s", stage, work_dir / "stages.log")
            return False
    return True


def run_size(report: Report, n: int, args: argparse.Namespace) -> None:
    from benchmarks.scale.synthetic import write_folder

    size_dir = args.work_dir / str(n)
    size_dir.mkdir(parents=True, exist_ok=True)
    section = report.data["sizes"].setdefault(str(n), {})
    tick = time.perf_counter()
    folder = write_folder(size_dir / "folder", n)
    if "synthetic_corpus" not in section:  # (a merged run finds it written)
        section["synthetic_corpus"] = {"seconds": round(time.perf_counter() - tick, 1),
                                       "mb": round(tree_size(folder) / 2**20, 1)}
    run_dir = size_dir / "cpu-small"
    run_dir.mkdir(exist_ok=True)
    settings = [f"run_dir={run_dir}", "data.source=folder", f"data.folder={folder}",
                f"train.train_steps={args.train_steps}", f"train.checkpoint_every_steps={args.train_steps}",
                "train.checkpoint_every_minutes=null", "train.train_minutes=0", "averaging.last_n=1", *args.settings]
    extra = ["--seconds", str(args.input_seconds)]
    stages = tuple(stage for stage in STAGES if stage in args.stages)
    if not run_stages(report, section, f"{n:,} pairs", CPU_SMALL, settings, run_dir, stages, extra):
        return
    if n in args.one_core_sizes:
        one_core_dir = size_dir / "cache-one-core"
        one_core_dir.mkdir(exist_ok=True)
        result = one_core_dir / "cache.result.json"
        command = ["taskset", "-c", "0", sys.executable, "-m", "benchmarks.scale.stages", "cache", "--config",
                   CPU_SMALL, "--result", str(result), *[a for s in settings for a in ("--set", s)],
                   "--set", f"input.cache_dir={one_core_dir}"]
        figures = measure(command, one_core_dir, one_core_dir / "stages.log")
        if result.is_file():
            figures["stage"] = json.loads(result.read_text(encoding="utf-8"))
            one = figures["stage"]["train"]["pairs_per_second"]
            every = section["cache"]["stage"]["train"]["pairs_per_second"]
            figures["core_ratio"] = round(every / one, 2)
        report.stage(section, "cache_one_core", figures)


def run_paper(report: Report, n: int, args: argparse.Namespace) -> None:
    size_dir = args.work_dir / str(n)
    run_dir = size_dir / "paper"
    run_dir.mkdir(parents=True, exist_ok=True)
    # The cpu-small run's prepared corpus (the same data settings: the stage finds it up to date),
    # unless the paper's run is the only one (it may run beside the sizes' run: its own then).
    data_dir = (run_dir if args.paper_only else size_dir / "cpu-small") / "data" / "folder-en-de"
    settings = [f"run_dir={run_dir}", "data.source=folder", f"data.folder={size_dir / 'folder'}",
                f"data.output_dir={data_dir}", f"train.train_steps={args.paper_steps}",
                f"train.checkpoint_every_steps={args.paper_steps}", "train.checkpoint_every_minutes=null",
                "train.train_minutes=0", "averaging.last_n=1", *args.paper_settings]
    section = report.data["paper"].setdefault(str(n), {"settings": settings})
    run_stages(report, section, f"paper's configuration, {n:,} pairs", PAPER, settings, run_dir,
               ("prepare", "vocabulary", "cache", "train"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale.data_stages",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="30000,300000,1200000,4500000")
    parser.add_argument("--one-core-sizes", default="300000", help="sizes whose token cache is built on one core too")
    parser.add_argument("--paper-size", type=int, default=1200000, help="0: no run of the paper's configuration")
    parser.add_argument("--paper-first", action="store_true", help="the paper's run right after its size")
    parser.add_argument("--paper-only", action="store_true", help="the paper's run alone, at --paper-size")
    parser.add_argument("--stages", default=",".join(STAGES),
                        help="the stages run at each size (default all; a stage left out uses what the work "
                             "directory holds from an earlier run)")
    parser.add_argument("--merge", action="store_true",
                        help="update the report at --output: this run's stages replace the same ones there")
    parser.add_argument("--train-steps", type=int, default=5)
    parser.add_argument("--paper-steps", type=int, default=2)
    parser.add_argument("--input-seconds", type=float, default=20.0)
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                        help="more overrides of the cpu-small config")
    parser.add_argument("--paper-set", dest="paper_settings", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--work-dir", type=Path, default=None, help="default: a new temporary directory")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true",
                        help="two tiny sizes (unless --sizes), a small vocabulary (the tests)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.smoke:
        for name, smoke in (("sizes", "400,1600"), ("one_core_sizes", "1600")):  # unless given
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, smoke)
        args.paper_size = 0
        args.train_steps, args.input_seconds = 2, 1.0
        args.settings = SMOKE_SETTINGS + args.settings
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    args.stages = [s for s in args.stages.split(",") if s]
    if set(args.stages) - set(STAGES):
        parser.error(f"--stages: {sorted(set(args.stages) - set(STAGES))} are not stages; stages: {', '.join(STAGES)}")
    args.one_core_sizes = {int(s) for s in args.one_core_sizes.split(",") if s}
    args.work_dir = (args.work_dir or Path(tempfile.mkdtemp(prefix="scale-"))).resolve()
    args.output = args.output or ROOT / "benchmarks" / "results" / f"scale-data-stages-{datetime.date.today()}.json"
    report = Report(args.output, args)
    if args.paper_only:
        from benchmarks.scale.synthetic import write_folder

        write_folder(args.work_dir / str(args.paper_size) / "folder", args.paper_size)
        run_paper(report, args.paper_size, args)
        emit(report.data, args.output)
        return 0
    for n in args.sizes:
        run_size(report, n, args)
        if args.paper_first and n == args.paper_size:
            run_paper(report, n, args)
    if args.paper_size and not args.paper_first and args.paper_size in args.sizes:
        run_paper(report, args.paper_size, args)
    emit(report.data, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
