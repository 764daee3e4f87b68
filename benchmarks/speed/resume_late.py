"""Restarting a training run late: seconds from process start to the first update at step 100,000.

    python -m benchmarks.speed.resume_late [--config configs/translation/cpu-small.yaml] [--step 100000]
        [--work-dir DIR] [--input JSON] [--model JSON] [--passes 1.5] [--replay-batches 1000,4000] [--repeats 2]
        [--output benchmarks/results/resume-late-<date>.json]

A resumed run continues its data stream exactly (``train.data_resume: skip``). It used to replay the
stream to the checkpoint, batch by batch; now the checkpoint holds the stream's position
(``pipelines.training.data``), restored in a time that does not grow with the step. This measures both
on ``--config``'s corpus, tokenizer, input pipeline and preset (the bundled DDTP En-De corpus and
``cpu-small`` by default):

1. A checkpoint is synthesized (``--synthesize``, in a process of its own): the run's model, optimizer
   and stream built as the training stage builds them, the stream advanced ``--passes`` passes over
   the data (its position then lies in a reshuffled pass, buckets part-filled), then step, optimizer
   iterations and batches consumed set to those of ``--step`` (the batches of a step counted on the
   stream as the trainer counts them) and saved with its position; beside it, for the replay, the
   same checkpoint without a position and with ``--replay-batches`` batches consumed.
2. Each is resumed by ``pipelines.training`` as a rerun would (``run_from_config``) in a new process,
   which reports the monotonic time of its first update and exits: the seconds from just before the
   process was started to that update. The position's resume ``--repeats`` times; the replay's at each
   ``--replay-batches``, a line fitted through them, and extrapolated to the batches ``--step``
   consumed (and to the paper's base run: 100,000 steps of 25,000 target tokens).

Also reported: the checkpoint's size with and without the position, and the seconds a save takes with
each. Timings hold for this machine and its load (both named in the report).
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks import ROOT
from flows.tools.report import emit

logger = logging.getLogger("resume_late")

#: Seconds within which a resumed run at step 100,000 must start training (issue 60).
TARGET_SECONDS = 60.0
#: The paper's base run: 100,000 steps of about 25,000 target tokens (section 5.1).
PAPER_TARGET_TOKENS = 100_000 * 25_000

#: The resumed run: its first update's monotonic time into argv[2], then out at once.
FIRST_UPDATE_SCRIPT = """
    import json, logging, os, sys, time
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    from pipelines.training import run_from_config

    def on_step(step, metrics):
        with open(sys.argv[2], "w") as marker:
            json.dump({"monotonic": time.monotonic(), "step": step}, marker)
        os._exit(0)

    run_from_config(sys.argv[1], on_step=on_step)
"""


def prepare(config: dict[str, Any], work: Path, vocab_size: int | None) -> tuple[Path, Path]:
    """The config's bundled corpus and tokenizer, prepared into ``work`` (kept for a rerun)."""
    from pipelines.corpus import Corpus
    from pipelines.tasks.translation.sources import SourceConfig, prepare_corpus
    from pipelines.tokenization import TokenizerConfig, train_tokenizer

    data = config.get("data") or {}
    corpus = Corpus.load(prepare_corpus(SourceConfig(source=data.get("source", "ddtp"),
                                                     language_pair=data.get("language_pair", "en-de"),
                                                     output_dir=str(work / "corpus"))))
    settings = dict(config.get("tokenizer") or {})
    if vocab_size:
        settings["vocab_size"] = vocab_size
    models = train_tokenizer(corpus, TokenizerConfig(**settings), work / "tokenizer")
    return corpus.directory, Path(models.source)


def write_job(path: Path, corpus_dir: Path, tokenizer: Path, input_settings: dict, train: dict) -> Path:
    data = {"corpus_dir": str(corpus_dir), "tokenizer": str(tokenizer), "input": input_settings,
            "validation_split": None}
    path.write_text(yaml.safe_dump({"train": train, "data": data}), encoding="utf-8")
    return path


def synthesize(spec: dict[str, Any]) -> dict[str, Any]:
    """Writes the late checkpoints of ``spec`` (see the module's step 1); what they hold."""
    import tensorflow as tf

    from keras_transformer.checkpoints.model_checkpoint import model_config_dict
    from pipelines.config import load_config
    from pipelines.corpus import Corpus
    from pipelines.input_pipeline import InputConfig, make_dataset
    from pipelines.tokenization import load_tokenizers, vocabulary_record
    from pipelines.training.checkpointing import RunCheckpoint
    from pipelines.training.cli import TrainingJobConfig
    from pipelines.training.config import CHECKPOINT_NAME
    from pipelines.training.loss_scale import LossScale
    from pipelines.training.runner import build_model, resumed_stream
    from pipelines.training.steps import step_complete
    from pipelines.training.strategy import build_configured_strategy
    from pipelines.training.workers import Workers
    from pipelines.vocabulary import as_vocabulary

    job = load_config(TrainingJobConfig, spec["job"])
    config, data = job.train, job.data
    strategy = build_configured_strategy(config)
    corpus = Corpus.load(data.corpus_dir, verify=False)
    tokenizers = load_tokenizers(data.tokenizer_models())
    input_config = InputConfig(**data.input)
    one_pass = make_dataset(corpus, "train", tokenizers, input_config, training=True)
    batches_a_pass = sum(1 for _ in one_pass)

    workers = Workers(strategy)
    sizes = tokenizers.map(lambda tokenizer: tokenizer.vocab_size)
    model, optimizer = build_model(config, as_vocabulary(sizes), strategy)
    checkpoint = RunCheckpoint(Path(config.checkpoint_dir), strategy, workers, model, optimizer,
                               LossScale(strategy, None), keep=1)
    checkpoint.claim(model_config_dict(model, preset=config.preset, vocabulary=vocabulary_record(tokenizers)), {})
    resume = checkpoint.restore()
    stream = resumed_stream(config, strategy, workers, checkpoint, resume,
                            lambda context: make_dataset(corpus, "train", tokenizers, input_config, training=True))
    tokens_per_step = config.resolved().tokens_per_batch
    advance = max(1, round(spec["passes"] * batches_a_pass))
    steps, count, tokens, all_tokens = 0, 0, 0.0, 0
    for _ in range(advance):
        target = next(stream.batches)[0][1]
        batch_tokens = int(tf.math.count_nonzero(target))
        count, tokens, all_tokens = count + 1, tokens + batch_tokens, all_tokens + batch_tokens
        # The batches of a step, as the trainer ends its steps.
        if step_complete(count, tokens, tokens_per_step, config.accumulation_batches):
            steps, count, tokens = steps + 1, 0, 0.0
    batches_per_step = advance / max(steps, 1)
    consumed = round(spec["step"] * batches_per_step)
    optimizer.iterations.assign(spec["step"])
    tick = time.perf_counter()
    with_position = checkpoint.save(spec["step"], consumed, 0.0)
    save_with = time.perf_counter() - tick
    # The same state without the position, for the replay: a checkpoint as written before positions were saved.
    replay_saves = []
    for batches in spec["replay_batches"]:
        directory = Path(spec["replay_dir"]) / f"consumed-{batches}"
        directory.mkdir(parents=True, exist_ok=True)
        for name in ("model_config.json", "train_config.json"):
            shutil.copy(Path(config.checkpoint_dir) / name, directory / name)
        checkpoint.consumed_batches.assign(batches)
        plain = tf.train.Checkpoint(**checkpoint.state)
        tick = time.perf_counter()
        tf.train.CheckpointManager(plain, str(directory), max_to_keep=1,
                                   checkpoint_name=CHECKPOINT_NAME).save(checkpoint_number=spec["step"])
        replay_saves.append(time.perf_counter() - tick)
    return {"checkpoint": with_position, "batches_a_pass": batches_a_pass, "advanced_batches": advance,
            "batches_per_step": round(batches_per_step, 4), "target_tokens_per_batch": round(all_tokens / advance, 1),
            "consumed_batches": consumed, "save_seconds_with_position": round(save_with, 3),
            "save_seconds_without_position": round(statistics.median(replay_saves), 3)}


def checkpoint_bytes(directory: Path, step: int) -> int:
    return sum(p.stat().st_size for p in directory.glob(f"ckpt-{step}.*"))


def first_update_seconds(job: Path, log: Path) -> float:
    """Seconds from just before a new process resumes ``job`` to its first update (the process' log to ``log``)."""
    with tempfile.TemporaryDirectory() as scratch:
        marker = Path(scratch) / "first-update.json"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
        with log.open("w") as output:
            start = time.monotonic()
            done = subprocess.run([sys.executable, "-c", textwrap.dedent(FIRST_UPDATE_SCRIPT), str(job), str(marker)],
                                  cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT, check=False)
        if not marker.is_file():
            raise RuntimeError(f"the resumed run exited {done.returncode} before its first update; see {log}")
        return json.loads(marker.read_text())["monotonic"] - start


def logged_seconds(log: Path, phrase: str) -> float | None:
    """The seconds of the log line holding ``phrase`` (``... in 1.2 s``), if any."""
    for line in log.read_text(errors="replace").splitlines():
        if phrase in line and line.rstrip().endswith(" s"):
            return float(line.rstrip()[:-2].rsplit(" ", 1)[1])
    return None


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares ``(intercept, slope)`` of ``y = a + b x``."""
    xs, ys = [x for x, _ in points], [y for _, y in points]
    if len(set(xs)) < 2:
        return ys[0], 0.0
    slope = statistics.covariance(xs, ys) / statistics.variance(xs)
    return statistics.fmean(ys) - slope * statistics.fmean(xs), slope


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "translation" / "cpu-small.yaml")
    parser.add_argument("--step", type=int, default=100_000)
    parser.add_argument("--work-dir", type=Path, help="kept between runs (corpus, tokenizer); default: temporary")
    parser.add_argument("--corpus-dir", type=Path, help="a prepared corpus instead of the config's")
    parser.add_argument("--tokenizer", type=Path, help="a SentencePiece model instead of training the config's")
    parser.add_argument("--vocab-size", type=int, help="instead of the config's tokenizer.vocab_size")
    parser.add_argument("--model", type=json.loads, default={}, help="JSON overrides of the preset's architecture")
    parser.add_argument("--input", type=json.loads, default={}, help="JSON overrides of the config's input section")
    parser.add_argument("--passes", type=float, default=1.5, help="passes over the data the stream is advanced")
    parser.add_argument("--replay-batches", default="1000,4000", help="batches the replayed checkpoints consumed")
    parser.add_argument("--repeats", type=int, default=2, help="resumes from the position")
    parser.add_argument("--output", type=Path, help="also write the JSON report here")
    parser.add_argument("--synthesize", type=json.loads, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.synthesize:
        Path(args.synthesize["result"]).write_text(json.dumps(synthesize(args.synthesize)), encoding="utf-8")
        return 0

    config = yaml.safe_load(args.config.read_text(encoding="utf-8"))
    replay_batches = [int(x) for x in args.replay_batches.split(",") if x.strip()]
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="resume-late-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.corpus_dir and args.tokenizer:
        corpus_dir, tokenizer = args.corpus_dir, args.tokenizer
    else:
        corpus_dir, tokenizer = prepare(config, work, args.vocab_size)
    run = work / f"run-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    run.mkdir(parents=True)
    input_settings = {**(config.get("input") or {}), **args.input}
    train = {"preset": config.get("train", {}).get("preset", "cpu-small"), "model": args.model,
             "train_steps": args.step + 1000, "train_minutes": 0, "checkpoint_every_steps": None,
             "checkpoint_every_minutes": None, "progress_bar": False, "log_every": 1000,
             "checkpoint_dir": str(run / "position")}
    job = write_job(run / "position.yaml", corpus_dir, tokenizer, input_settings, train)
    spec = {"job": str(job), "step": args.step, "passes": args.passes, "replay_batches": replay_batches,
            "replay_dir": str(run / "replay"), "result": str(run / "synthesized.json")}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    with (run / "synthesize.log").open("w") as output:
        done = subprocess.run([sys.executable, "-m", "benchmarks.speed.resume_late", "--synthesize", json.dumps(spec)],
                              cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT, check=False)
    if done.returncode:
        raise SystemExit(f"synthesizing the checkpoint failed; see {run / 'synthesize.log'}")
    synthesized = json.loads((run / "synthesized.json").read_text())
    logger.info("synthesized %s", synthesized)

    position_runs = []
    for index in range(args.repeats):
        log = run / f"position-{index}.log"
        seconds = first_update_seconds(job, log)
        restore = logged_seconds(log, "restored the data position")
        if restore is None or "skipping" in log.read_text(errors="replace"):
            raise SystemExit(f"the resume did not restore the data position; see {log}")
        position_runs.append({"seconds_to_first_update": round(seconds, 2), "position_restore_seconds": restore})
        logger.info("resumed from the position: %.1f s to the first update", seconds)
    replay_points = []
    for batches in replay_batches:
        directory = run / "replay" / f"consumed-{batches}"
        replay_job = write_job(run / f"replay-{batches}.yaml", corpus_dir, tokenizer, input_settings,
                               {**train, "checkpoint_dir": str(directory)})
        log = run / f"replay-{batches}.log"
        seconds = first_update_seconds(replay_job, log)
        if f"skipping {batches} batches" not in log.read_text(errors="replace"):
            raise SystemExit(f"the resume did not replay {batches} batches; see {log}")
        replay_points.append({"consumed_batches": batches, "seconds_to_first_update": round(seconds, 2)})
        logger.info("resumed by replaying %d batches: %.1f s to the first update", batches, seconds)

    intercept, slope = fit_line([(p["consumed_batches"], p["seconds_to_first_update"]) for p in replay_points])
    tokens_per_second = synthesized["target_tokens_per_batch"] / slope if slope > 0 else None
    position_seconds = statistics.median(r["seconds_to_first_update"] for r in position_runs)
    with_position = checkpoint_bytes(run / "position", args.step)
    first_replay = run / "replay" / f"consumed-{replay_batches[0]}"
    without = checkpoint_bytes(first_replay, args.step) if replay_batches else None
    report = {
        "benchmark": "resume_late", "config": str(args.config.relative_to(ROOT) if args.config.is_relative_to(ROOT)
                                                  else args.config),
        "preset": train["preset"], "model_overrides": args.model, "input": input_settings, "step": args.step,
        "target_seconds": TARGET_SECONDS,
        "synthesized": {key: synthesized[key] for key in synthesized if key != "checkpoint"},
        "position": {"runs": position_runs, "median_seconds_to_first_update": position_seconds,
                     "meets_target": position_seconds <= TARGET_SECONDS},
        "replay": {
            "points": replay_points, "start_seconds": round(intercept, 2),
            "seconds_per_batch": round(slope, 6),
            "target_tokens_per_second": round(tokens_per_second) if tokens_per_second else None,
            "estimated_seconds_to_first_update_at_step": round(intercept + slope * synthesized["consumed_batches"], 1),
            "estimated_seconds_for_the_paper_base_run": (round(intercept + PAPER_TARGET_TOKENS / tokens_per_second)
                                                         if tokens_per_second else None),
        },
        "checkpoint_bytes": {"with_position": with_position, "without_position": without,
                             "position": with_position - without if without else None},
        "work_dir": str(run),
    }
    emit(report, args.output)
    if not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
