"""The neural parsing peer of :mod:`.bench_parsing_peers`: supar's CRF parser, run from its own virtualenv.

**supar** (Zhang, Zhou & Li, IJCAI 2020, package ``supar-bauwenst``) runs from its own virtualenv:
`write_pid` / `read_pid` convert trees to its one-tree-per-line files, `train_supar` runs
``con-crf train`` under a wall-clock budget (keeping a copy of each best-on-dev model as it is
saved) and `predict_supar` runs ``con-crf predict``. See /work/shared/baselines/supar/README.md.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from pipelines.tasks.parsing.tree import Tree, parse_tree

logger = logging.getLogger("supar_peer")


# --- supar ----------------------------------------------------------------------------------------------------

SUPAR_CONFIG = """\
# /work/shared/baselines/supar/crf-con.ini: crf-con-en's network without BERT; epochs and patience
# are never reached, the benchmark stops training by wall clock.
[Data]
encoder = 'lstm'
feat = ['char']
bert = 'bert-base-cased'

[Network]
n_embed = 100
n_pretrained = 100
n_feat_embed = 100
n_char_embed = 50
n_char_hidden = 100
char_pad_index = 0
embed_dropout = .33
n_encoder_hidden = 800
n_encoder_layers = 3
encoder_dropout = .33
n_span_mlp = 500
n_label_mlp = 100
mlp_dropout = .33

[Optimizer]
lr = 2e-3
mu = .9
nu = .9
eps = 1e-12
weight_decay = 0
clip = 5.0
min_freq = 2
fix_len = 20
decay = .75
decay_steps = 5000
update_steps = 1

[Train]
epochs = 1000
patience = 100
batch_size = 5000
"""


def write_pid(trees: Sequence[Tree], path: Path) -> Path:
    """One ``(TOP ...)`` tree per line, supar's input format (never name it ``*.txt``)."""
    path.write_text("".join(tree.to_string() + "\n" for tree in trees), encoding="utf-8")
    return path


def read_pid(path: Path) -> list[Tree]:
    """The trees of a one-tree-per-line file, normalised like the treebank reader's."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [parse_tree(line, source=str(path), line=i + 1) for i, line in enumerate(lines) if line.strip()]


def _supar_env(threads: int) -> dict:
    # torch >= 2.6 refuses supar's pickled checkpoints without the second variable.
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _command(venv: Path, cores: str | None, *args: str) -> list[str]:
    prefix = ["taskset", "-c", cores] if cores else []
    return [*prefix, str(venv / "bin" / "con-crf"), *args]


def supar_epochs(log: Path) -> list[dict]:
    """Per epoch of supar's training log: number, dev labelled F1, finished, model saved (improved on dev)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    text = re.split(r"Epoch \d+ saved", text)[0]  # the summary after a normal end repeats the best dev score
    parts = re.split(r"Epoch (\d+) / \d+:", text)
    epochs = []
    for number, block in zip(parts[1::2], parts[2::2]):
        dev = re.search(r"dev:.*?LF:\s*([\d.]+)", block)
        done = re.search(r"s elapsed( \(saved\))?\n", block)
        epochs.append({"epoch": int(number), "dev_labelled_f1": float(dev.group(1)) if dev else None,
                       "finished": done is not None, "saved": bool(done and done.group(1))})
    return epochs


def train_supar(venv: Path, work: Path, files: dict[str, Path], minutes: float, threads: int,
                cores: str | None) -> dict:
    """Run ``con-crf train`` for ``minutes`` of wall clock; keep a copy of each improving model as ``model.best``."""
    config = work / "crf-con.ini"
    config.write_text(SUPAR_CONFIG)
    model, best = work / "model", work / "model.best"
    log = work / "model.train.log"
    for stale in (model, best, log, work / "model.best.predict.log", work / "test.pred.pid"):
        stale.unlink(missing_ok=True)  # a reused work dir must not lend this run an earlier run's model
    command = _command(venv, cores, "train", "-b", "-d", "-1", "--threads", str(threads), "-c", str(config),
                       "-p", str(model), "--feat", "char", "--embed", "", "--mbr", "--train", str(files["train"]),
                       "--dev", str(files["dev"]), "--test", str(files["test"]))
    logger.info("supar train: %s", " ".join(command))
    started = time.monotonic()
    deadline = started + minutes * 60
    copied: list[dict] = []  # the saved epochs, in order; model.best holds the last one

    def keep_saved() -> None:
        # The "(saved)" line is logged after the checkpoint is written: the file is complete then.
        saved = [epoch for epoch in supar_epochs(log) if epoch["saved"]]
        if len(saved) > len(copied):
            shutil.copyfile(model, best)
            copied[:] = saved
            logger.info("supar: model of epoch %d kept at %.0f s", saved[-1]["epoch"], time.monotonic() - started)

    with open(work / "train.stderr", "w") as stderr:
        process = subprocess.Popen(command, cwd=work, env=_supar_env(threads), stdout=subprocess.DEVNULL,
                                   stderr=stderr, start_new_session=True)
        killed = False
        while process.poll() is None:
            time.sleep(1.0)
            keep_saved()
            if time.monotonic() > deadline:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                killed = True
    seconds = time.monotonic() - started
    if not killed and process.returncode != 0:
        raise RuntimeError(f"con-crf train failed ({process.returncode}): "
                           f"{(work / 'train.stderr').read_text(errors='replace')[-3000:]}")
    keep_saved()
    if not killed and model.exists():
        shutil.copyfile(model, best)  # ended by itself (patience): supar saved the best model again at the end
    finished = [epoch for epoch in supar_epochs(log) if epoch["finished"]]
    return {"seconds": round(seconds, 1), "stopped_by_budget": killed, "epochs_finished": len(finished),
            "dev_labelled_f1_per_epoch": [epoch["dev_labelled_f1"] for epoch in finished],
            "model_epoch": copied[-1]["epoch"] if copied else None,
            "model_dev_labelled_f1": copied[-1]["dev_labelled_f1"] if copied else None,
            "model_saved": best.exists(), "command": " ".join(command)}


def predict_supar(venv: Path, work: Path, data: Path, threads: int, cores: str | None) -> tuple[Path, dict]:
    """Run ``con-crf predict`` with the best saved model; return the prediction file and timings."""
    pred = work / "test.pred.pid"
    command = _command(venv, cores, "predict", "-d", "-1", "--threads", str(threads), "-p", str(work / "model.best"),
                       "--data", str(data), "--pred", str(pred), "--mbr")
    started = time.monotonic()
    done = subprocess.run(command, cwd=work, env=_supar_env(threads), capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"con-crf predict failed ({done.returncode}): {done.stderr[-3000:]}")
    log = (work / "model.best.predict.log")
    text = log.read_text(errors="replace") if log.exists() else done.stderr
    own = re.findall(r"([\d.]+) Sents/s", text)
    return pred, {"seconds_with_loading": round(seconds, 2),
                  "supar_sentences_per_second": float(own[-1]) if own else None,
                  "command": " ".join(command)}
