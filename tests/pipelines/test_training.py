"""Training stage: token-normalised accumulation, resume (in-process and after kill -9), the NaN
guard, mixed precision and XLA, and the multi-replica / multi-worker tests in subprocesses.

The model is the ``demo`` preset shrunk to one layer of width 32; the data are real DDTP
sentence pairs through the real input pipeline (``ddtp_corpus`` and ``tokenizer`` fixtures).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import yaml

from keras_transformer import (
    Transformer,
    get_preset,
    label_smoothed_nll,
    transformer_adam,
)
from keras_transformer.checkpoints.model_checkpoint import (
    model_config_dict,
    model_keys,
    write_model_config,
)
from pipelines.config import ConfigError, load_config
from pipelines.input_pipeline import (
    make_dataset,
    make_fixed_length_dataset,
)
from pipelines.training import (
    TrainConfig,
    TrainingDivergedError,
    TrainingJobConfig,
    read_metrics,
    run_from_config,
    seed_initialisation,
    train,
)
from tests.pipelines.conftest import INPUT, TINY_MODEL, tiny_config

REPO = Path(__file__).resolve().parents[2]
#: Environment of subprocesses: quiet TF, and no thread oversubscription on the shared CPU.
SUBPROCESS_ENV = {
    **os.environ,
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "TF_NUM_INTEROP_THREADS": "1",
    "TF_NUM_INTRAOP_THREADS": "1",
    "PYTHONPATH": str(REPO),
}
#: Seconds before a subprocess counts as hung: a safety net, not a limit on a busy machine's speed.
HUNG = 1800


@pytest.fixture(scope="session")
def ordered_dataset_fn(ddtp_corpus, tokenizer, input_config, train_dataset_fn):
    """Training batches in corpus order (no shuffle): the same batches in every iteration."""
    return lambda: make_dataset(ddtp_corpus, "train", tokenizer, input_config, training=False)


@pytest.fixture(scope="session")
def validation_dataset(ddtp_corpus, tokenizer, input_config):
    return make_dataset(ddtp_corpus, "validation", tokenizer, input_config, training=False)


@pytest.fixture(scope="session")
def job_yaml_data(ddtp_corpus, tokenizer_model, train_dataset_fn) -> dict:
    """The ``data:`` section of a CLI config over the same corpus, tokenizer and input."""
    return {"corpus_dir": str(ddtp_corpus.directory), "tokenizer": str(tokenizer_model),
            "input": dict(INPUT), "validation_split": None, "verify_corpus": False}


def write_job(path: Path, data: dict, **train_settings) -> Path:
    train_section = {
        "preset": "demo", "model": dict(TINY_MODEL), "warmup_steps": 20, "learning_rate_scale": 1.0,
        "decay_fraction": 0, "train_minutes": 0,
        "tokens_per_step": 300, "checkpoint_every_minutes": None, "progress_bar": False,
        "log_every": 1, **train_settings,
    }
    path.write_text(yaml.safe_dump({"train": train_section, "data": data}), encoding="utf-8")
    return path


def run_python(code: str, *args: str, timeout: float = HUNG, env=None) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], cwd=REPO, env=env or SUBPROCESS_ENV,
        capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"subprocess failed:\n{result.stdout}\n{result.stderr[-6000:]}"
    return result


def weights_of(model) -> list[np.ndarray]:
    return [np.array(w.numpy()) for w in model.weights]


def comparable(model) -> list[bool]:
    """Weights whose update is determined by the data: not the attention key biases.

    A key bias adds the same term to every score of a query, which the softmax cancels: its
    gradient is zero up to rounding, and Adam's first step (about lr * g / (|g| + eps))
    turns that rounding noise into an arbitrary update.
    """
    return [not w.path.endswith("/key/bias") for w in model.weights]


def assert_same_updates(actual, desired, atol=2e-4):
    """Weights after a few Adam steps agree up to the summation order of their gradients.

    Per-element Adam updates are ~lr = 0.01-0.03 in these tests. Where a gradient component
    nearly cancels (a rarely seen token), Adam's normalisation turns the rounding of the
    multi-threaded sums into a visible update (4.5e-4 seen once in a clean-clone run, one element
    in 1024); a wrong normalisation or a lost batch moves most elements by ~4e-3.
    """
    off = np.abs(np.asarray(actual) - np.asarray(desired))
    outliers = int(np.sum(off > atol))
    assert outliers <= max(1, off.size // 200), f"{outliers} of {off.size} differ by > {atol}"
    assert off.max() <= 25 * atol, f"max difference {off.max():.3g}"


# --------------------------------------------------------------------------- configuration


def test_config_defaults_from_preset_and_validation(tmp_path):
    config = TrainConfig(preset="base")
    resolved = config.resolved()
    recipe = get_preset("base").training
    # The plan is the preset's recipe, typed and frozen, with the stage's settings applied.
    assert resolved == recipe
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolved.warmup_steps = 1
    assert resolved.train_steps == 100000 and resolved.tokens_per_batch == 25000
    assert resolved.label_smoothing == 0.1 and resolved.warmup_steps == 4000
    assert (resolved.adam_beta_1, resolved.adam_beta_2, resolved.adam_epsilon) == (0.9, 0.98, 1e-9)
    assert config.checkpoints_kept() >= recipe.checkpoints_to_average
    assert resolved.learning_rate_scale == 1.0
    assert TrainConfig(preset="cpu-small").resolved().learning_rate_scale == 0.679
    changed = TrainConfig(preset="cpu-small", learning_rate_scale=0.5, tokens_per_step=512, warmup_steps=7).resolved()
    assert (changed.learning_rate_scale, changed.tokens_per_batch, changed.warmup_steps) == (0.5, 512, 7)
    with pytest.raises(ConfigError, match="keep_checkpoints.*averages the last 20"):
        TrainConfig(preset="big", keep_checkpoints=5)
    # Model values are checked with the config, not when the model is built after the data stages.
    with pytest.raises(ConfigError, match="TrainConfig.model.*num_heads.*positive integer"):
        TrainConfig(preset="cpu-small", model={"num_heads": "four"})
    with pytest.raises(ConfigError, match="TrainConfig.model.*d_model=256 is not divisible by num_heads=3"):
        TrainConfig(preset="cpu-small", model={"num_heads": 3})
    with pytest.raises(ConfigError, match="unknown model setting"):
        TrainConfig(model={"d_modle": 3})
    with pytest.raises(ConfigError, match="mixed_precision"):
        TrainConfig(mixed_precision="float8")
    path = tmp_path / "job.yaml"
    path.write_text("train:\n  preset: demo\n  keep_checkpoints: 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="keep_checkpoints"):
        load_config(TrainingJobConfig, path)
    path.write_text("train:\n  preset: demo\n  jit_compile: true\n  chekpoint_dir: x\n")
    with pytest.raises(ConfigError, match="chekpoint_dir"):
        load_config(TrainingJobConfig, path)


# --------------------------------------------------------------------------- in-process training


def test_accumulates_to_token_budget_and_resumes_schedule_and_optimizer(
        tmp_path, train_dataset_fn, validation_dataset):
    budget = 900  # about three batches of the 384-token input budget
    config = tiny_config(tmp_path, tokens_per_step=budget, train_steps=4,
                         validation_max_batches=4)
    seen = []
    first = train(config, train_dataset_fn(), 2000, validation_data=validation_dataset,
                  on_step=lambda step, metrics: seen.append((step, metrics)))
    assert first.final_step == 4 and first.optimizer_steps == 4 and first.start_step == 0
    assert [s for s, _ in seen] == [1, 2, 3, 4]
    for record in first.history:
        per_batch = record["tokens"] / record["batches"]
        assert record["batches"] >= 2
        # The step ended once within half an average batch of the budget, not before, and
        # overshot by less than one batch (a batch holds at most 384 tokens).
        assert record["tokens"] >= budget - per_batch / 2
        assert record["tokens"] < budget + INPUT["tokens_per_batch"]
        assert math.isfinite(record["loss"]) and record["tokens_per_second"] > 0
    assert math.isfinite(first.validation["loss"]) and first.validation["tokens"] > 0
    assert [Path(p).name for p in first.checkpoints] == ["ckpt-2", "ckpt-4"]
    info = json.loads((tmp_path / "run" / "model_config.json").read_text())
    assert info["preset"] == "demo" and info["config"]["d_model"] == 32
    adam_before = {k: v for k, v in tf.train.list_variables(first.checkpoints[-1])
                   if k.startswith("optimizer/")}
    assert adam_before

    # Resume in a new "process" (new model and optimizer objects) and continue to step 6.
    resumed = train(tiny_config(tmp_path, tokens_per_step=budget, train_steps=6),
                    train_dataset_fn(), 2000)
    assert resumed.start_step == 4 and resumed.final_step == 6 and resumed.optimizer_steps == 6
    # The schedule continued: the learning rate of step 5 is equation (3) at step_num 5.
    d_model, warmup = 32, 20
    expected = d_model**-0.5 * min(5**-0.5, 5 * warmup**-1.5)
    step5 = [r for r in resumed.history if r["step"] == 5][0]
    assert step5["learning_rate"] == pytest.approx(expected, rel=1e-5)
    assert [r["step"] for r in resumed.history] == [1, 2, 3, 4, 5, 6]
    assert resumed.history[:4] == read_metrics(tmp_path / "run")[:4]


def test_loss_is_normalised_by_the_global_token_count(tmp_path, ordered_dataset_fn):
    """One step over two accumulated batches equals, by hand, Adam on sum(losses) / tokens."""
    # A small and a large batch: their weights in the loss differ between normalisations.
    ((source, target_in), target_out), b2 = list(ordered_dataset_fn().take(2))
    b1 = ((source[:2], target_in[:2]), target_out[:2])
    tokens = [int(tf.reduce_sum(tf.cast(b[1] != 0, tf.int32))) for b in (b1, b2)]
    assert tokens[1] > 2 * tokens[0]
    data = tf.data.Dataset.from_tensors(b1).concatenate(tf.data.Dataset.from_tensors(b2))
    config = tiny_config(tmp_path, train_steps=1, accumulation_batches=2)
    result = train(config, data, 2000)
    assert result.history[0]["tokens"] == sum(tokens)

    def by_hand(normalisation):
        seed_initialisation(config.seed)
        model = Transformer.from_preset("demo", vocab_size=2000, **TINY_MODEL)
        model.build()
        with tf.GradientTape() as tape:
            sums, counts = [], []
            for (source, target_in), target_out in (b1, b2):
                logits = model((source, target_in), training=True)
                losses, mask = label_smoothed_nll(target_out, logits, 0.1)
                sums.append(tf.reduce_sum(losses))
                counts.append(tf.reduce_sum(mask))
            if normalisation == "global":
                loss = tf.add_n(sums) / tf.add_n(counts)
            else:  # the mean of per-batch (per-replica) means
                loss = (sums[0] / counts[0] + sums[1] / counts[1]) / 2
        grads = tape.gradient(loss, model.trainable_variables)
        transformer_adam(32, 20).apply(grads, model.trainable_variables)
        return float(loss), weights_of(model)

    loss, expected = by_hand("global")
    other_loss, other = by_hand("per_batch")
    assert result.history[0]["loss"] == pytest.approx(loss, rel=1e-5)
    # Adam's first step is close to lr * sign(gradient) (lr ~ 0.01 here): components with a
    # tiny gradient differ by float rounding (5.02e-5 seen once, from the order of multi-threaded
    # sums); the other normalisation moves weights by ~4e-3 (checked below).
    atol = 2e-4
    for mine, reference, check in zip(weights_of(result.model), expected,
                                      comparable(result.model)):
        if check:
            assert_same_updates(mine, reference, atol)
    assert other_loss != pytest.approx(loss, rel=1e-5)
    assert max(np.abs(a - b).max() for a, b in zip(weights_of(result.model), other)) > 10 * atol


def test_nan_guard_names_the_step_and_keeps_the_last_good_checkpoint(tmp_path, train_dataset_fn):
    models = []

    def model_fn(model_config, dtype):
        models.append(Transformer(**model_config.to_dict()))
        return models[-1]

    def inject_nan(step, metrics):
        if step == 3:
            # A real NaN in a real weight: the next forward pass produces a NaN loss.
            kernel = models[0].encoder_layers[0].feed_forward.weights[0]
            kernel.assign(tf.fill(kernel.shape, float("nan")))

    config = tiny_config(tmp_path, train_steps=6, checkpoint_every_steps=1)
    with pytest.raises(TrainingDivergedError, match="diverged at step 4") as caught:
        train(config, train_dataset_fn(), 2000, on_step=inject_nan, model_fn=model_fn)
    assert caught.value.step == 4
    assert caught.value.last_checkpoint.endswith("ckpt-3")
    assert "ckpt-3" in str(caught.value)
    run = tmp_path / "run"
    assert tf.train.latest_checkpoint(str(run)).endswith("ckpt-3")
    assert not list(run.glob("ckpt-4*"))
    reader = tf.train.load_checkpoint(str(run / "ckpt-3"))
    for key in model_keys(reader):
        assert np.all(np.isfinite(reader.get_tensor(key))), key
    assert [r["step"] for r in read_metrics(run)] == [1, 2, 3]


def test_mixed_bfloat16_loss_is_finite_and_close_to_float32(tmp_path, train_dataset_fn):
    losses = {}
    for precision in ("none", "mixed_bfloat16"):
        config = tiny_config(tmp_path / precision, train_steps=3, mixed_precision=precision,
                             checkpoint_every_steps=None)
        result = train(config, train_dataset_fn(), 2000)
        losses[precision] = [r["loss"] for r in result.history]
        if precision == "mixed_bfloat16":
            assert result.model.compute_dtype == "bfloat16"
            assert all(w.dtype == "float32" for w in result.model.weights)
            (source, target_in), _ = next(iter(train_dataset_fn()))
            assert result.model((source, target_in)).dtype == tf.float32
    assert all(math.isfinite(x) for x in losses["mixed_bfloat16"])
    np.testing.assert_allclose(losses["mixed_bfloat16"], losses["none"], rtol=0.02)


def test_mixed_float16_uses_dynamic_loss_scaling(tmp_path, train_dataset_fn):
    config = tiny_config(tmp_path, train_steps=3, mixed_precision="mixed_float16",
                         loss_scale_growth_steps=2, checkpoint_every_steps=None)
    result = train(config, train_dataset_fn(), 2000)
    assert result.model.compute_dtype == "float16"
    assert all(math.isfinite(r["loss"]) for r in result.history)
    # Grown once after two finite steps (or halved by an overflow, then the step retried).
    scales = [r["loss_scale"] for r in result.history]
    assert scales[0] in (2.0**15, 2.0**14) and max(scales) >= 2.0**15
    reader = tf.train.load_checkpoint(result.latest_checkpoint)
    assert reader.get_tensor("loss_scale/.ATTRIBUTES/VARIABLE_VALUE") == scales[-1]


def test_jit_compile_matches_the_graph_step(tmp_path, ddtp_corpus, tokenizer, input_config):
    # Fixed-length batches: XLA compiles once per shape.
    def data():
        return make_fixed_length_dataset(ddtp_corpus, "validation", tokenizer, input_config)

    config = tiny_config(tmp_path, train_steps=2, jit_compile=True, accumulation_batches=1,
                         checkpoint_every_steps=None)
    history = train(config, data(), 2000).history
    # Step 1's loss is the initial model's loss on the first batch: computed here without XLA.
    seed_initialisation(config.seed)
    model = Transformer.from_preset("demo", vocab_size=2000, **TINY_MODEL)
    (source, target_in), target_out = next(iter(data()))
    losses, mask = label_smoothed_nll(target_out, model((source, target_in)), 0.1)
    expected = float(tf.reduce_sum(losses) / tf.reduce_sum(mask))
    assert history[0]["loss"] == pytest.approx(expected, rel=1e-4)
    assert math.isfinite(history[1]["loss"]) and history[1]["loss"] != history[0]["loss"]


def test_resuming_a_directory_of_another_model_is_refused(tmp_path, train_dataset_fn):
    # The directory of a run of the same preset with d_ff 64 ...
    previous = Transformer.from_preset("demo", vocab_size=2000, **TINY_MODEL)
    write_model_config(tmp_path / "run", model_config_dict(previous, preset="demo"))
    # ... is not resumed with d_ff 128.
    other = tiny_config(tmp_path, train_steps=2, model={**TINY_MODEL, "d_ff": 128})
    with pytest.raises(ConfigError, match=r"different model \(d_ff 64 != 128"):
        train(other, train_dataset_fn(), 2000)


# --------------------------------------------------------------------------- subprocesses


MIRRORED_SCRIPT = """
    import json, sys
    from pipelines.distribution import split_cpu, build_strategy
    devices = split_cpu(2)
    import numpy as np, tensorflow as tf
    from keras_transformer import Transformer, label_smoothed_nll, transformer_adam
    from pipelines.config import load_config
    from pipelines.corpus import Corpus
    from pipelines.input_pipeline import InputConfig, make_dataset
    from pipelines.tokenization import load_tokenizers
    from pipelines.training import TrainConfig, seed_initialisation, train
    from pipelines.vocabulary import Vocabulary
    args = json.loads(sys.argv[1])
    corpus = Corpus.load(args["corpus_dir"], verify=False)
    tokenizer, _ = load_tokenizers(Vocabulary(args["tokenizer"]))
    input_config = InputConfig(**args["input"])

    def shrink_even(index, batch):
        # Every other batch keeps 2 sentences: the two replicas hold very different numbers of
        # tokens, so normalising per replica would give another loss than the global count.
        (source, target_in), target_out = batch
        n = tf.where(index % 2 == 0, tf.minimum(2, tf.shape(source)[0]), tf.shape(source)[0])
        return (source[:n], target_in[:n]), target_out[:n]

    def data():
        dataset = make_dataset(corpus, "train", tokenizer, input_config, training=False)
        return dataset.enumerate().map(shrink_even)
    common = dict(preset="demo", model=args["model"], train_steps=3, warmup_steps=20,
                  learning_rate_scale=1.0, decay_fraction=0, train_minutes=0,
                  checkpoint_every_steps=None, checkpoint_every_minutes=None,
                  progress_bar=False, data_resume="restart")
    results = {}
    # One device, two accumulated batches per step ...
    one = train(TrainConfig(**common, checkpoint_dir=args["dir"] + "/one", strategy="one_device",
                            devices=["/cpu:0"], accumulation_batches=2), data(), 2000)
    # ... against two replicas, one batch each: the same global batch per step.
    two = train(TrainConfig(**common, checkpoint_dir=args["dir"] + "/two", strategy="mirrored",
                            devices=devices, accumulation_batches=1), data(), 2000)
    # ... and the paper's loss computed by hand: Adam on sum(losses) / tokens of both batches.
    seed_initialisation(0)
    model = Transformer.from_preset("demo", vocab_size=2000, **args["model"])
    model.build()
    optimizer = transformer_adam(32, 20)
    batches = list(data().take(6))
    manual, replica_means = [], []
    for i in range(3):
        with tf.GradientTape() as tape:
            total, count, means = 0.0, 0.0, []
            for (s, t), y in batches[2 * i: 2 * i + 2]:
                losses, mask = label_smoothed_nll(y, model((s, t), training=True), 0.1)
                total += tf.reduce_sum(losses); count += tf.reduce_sum(mask)
                means.append(float(tf.reduce_sum(losses) / tf.reduce_sum(mask)))
            loss = total / count
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        manual.append(float(loss)); replica_means.append(float(np.mean(means)))
    out = {"one": [r["loss"] for r in one.history], "two": [r["loss"] for r in two.history],
           "one_batches": [r["batches"] for r in one.history],
           "two_batches": [r["batches"] for r in two.history],
           "manual": manual, "replica_means": replica_means,
           "one_steps": one.optimizer_steps, "two_steps": two.optimizer_steps}
    out["comparable"] = [not w.path.endswith("/key/bias") for w in one.model.weights]
    np.savez(args["dir"] + "/weights.npz",
             **{f"one_{i}": w.numpy() for i, w in enumerate(one.model.weights)},
             **{f"two_{i}": w.numpy() for i, w in enumerate(two.model.weights)},
             **{f"manual_{i}": w.numpy() for i, w in enumerate(model.weights)})
    with open(args["dir"] + "/result.json", "w") as f:
        json.dump(out, f)
"""


def test_two_logical_cpus_match_one_device_on_the_same_global_batch(
        tmp_path, ddtp_corpus, tokenizer_model, train_dataset_fn):
    args = {"corpus_dir": str(ddtp_corpus.directory), "tokenizer": str(tokenizer_model),
            "input": INPUT, "model": TINY_MODEL, "dir": str(tmp_path)}
    run_python(MIRRORED_SCRIPT, json.dumps(args))
    out = json.loads((tmp_path / "result.json").read_text())
    assert out["one_batches"] == [2, 2, 2] and out["two_batches"] == [1, 1, 1]
    assert out["one_steps"] == out["two_steps"] == 3
    np.testing.assert_allclose(out["two"], out["one"], rtol=1e-5)
    np.testing.assert_allclose(out["one"], out["manual"], rtol=1e-5)
    # Per-replica normalisation would have given another loss: the test can tell them apart.
    assert max(abs(a - b) for a, b in zip(out["manual"], out["replica_means"])) > 1e-3
    weights = np.load(tmp_path / "weights.npz")
    count = len([k for k in weights.files if k.startswith("one_")])
    for i in range(count):
        if not out["comparable"][i]:  # see comparable()
            continue
        assert_same_updates(weights[f"two_{i}"], weights[f"one_{i}"])
        assert_same_updates(weights[f"one_{i}"], weights[f"manual_{i}"])


WORKER_SCRIPT = """
    import json, logging, os, sys
    logging.basicConfig(level=logging.INFO)
    import numpy as np
    from pipelines.training import run_from_config
    result = run_from_config(sys.argv[1])
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    np.savez(sys.argv[2] + f"/worker{index}.npz", *[w.numpy() for w in result.model.weights])
    with open(sys.argv[2] + f"/worker{index}.json", "w") as f:
        json.dump({"final_step": result.final_step, "optimizer_steps": result.optimizer_steps,
                   "history": result.history, "checkpoints": result.checkpoints}, f)
"""


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_two_worker_multi_worker_mirrored_run_agrees_on_weights(tmp_path, job_yaml_data):
    # Checkpoints by time (every 60 ns: after every step, however fast the machine), a decision
    # the workers must share, and the chief's validation at the end.
    config = write_job(tmp_path / "job.yaml", {**job_yaml_data, "validation_split": "validation"},
                       train_steps=3, checkpoint_dir=str(tmp_path / "run"),
                       checkpoint_every_steps=None, checkpoint_every_minutes=1e-9,
                       validation_max_batches=2, strategy="auto")
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    processes = []
    for index in range(2):
        env = {**SUBPROCESS_ENV, "TF_CONFIG": json.dumps(
            {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})}
        processes.append(subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(WORKER_SCRIPT), str(config), str(tmp_path)],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        outputs = [p.communicate(timeout=HUNG) for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
    for p, (_, stderr) in zip(processes, outputs):
        assert p.returncode == 0, stderr[-6000:]
    for _, stderr in outputs:
        assert "'kind': 'multi_worker', 'class': 'CollectiveAllReduceStrategy', 'replicas': 2, " \
            "'workers': 2" in stderr
    chief, other = (json.loads((tmp_path / f"worker{i}.json").read_text()) for i in range(2))
    assert chief["final_step"] == other["final_step"] == 3
    assert chief["optimizer_steps"] == other["optimizer_steps"] == 3
    assert [r["step"] for r in chief["history"]] == [1, 2, 3] and other["history"] == []
    assert [Path(p).name for p in chief["checkpoints"]] == ["ckpt-1", "ckpt-2", "ckpt-3"]
    assert not [p for p in (tmp_path / "run").iterdir() if p.name.startswith("worker")]
    assert math.isfinite(chief["history"][-1]["val_loss"])
    a, b = np.load(tmp_path / "worker0.npz"), np.load(tmp_path / "worker1.npz")
    assert len(a.files) == len(b.files) > 0
    for key in a.files:
        np.testing.assert_allclose(a[key], b[key], atol=1e-6)
    # Both workers' batches entered each update: one batch holds at most 384 target tokens.
    assert all(r["batches"] == 1 and r["tokens"] > INPUT["tokens_per_batch"]
               for r in chief["history"])


PAUSING_SCRIPT = """
    import os, sys, time
    from pipelines.training import run_from_config

    def on_step(step, metrics):
        # Mid-run for as long as the parent needs: after step argv[3] (its record and any
        # checkpoint written), say so in the marker file argv[2] and wait there to be killed.
        if step == int(sys.argv[3]):
            with open(sys.argv[2] + ".tmp", "w") as marker:
                marker.write(f"{os.getpid()} {step}")
            os.replace(sys.argv[2] + ".tmp", sys.argv[2])
            while True:
                time.sleep(1)

    run_from_config(sys.argv[1], on_step=on_step)
"""


def test_sigkill_mid_training_resumes_at_the_right_step(tmp_path, job_yaml_data):
    steps = 16
    # With dropout: the checkpoint carries the dropout generators' state too.
    common = dict(train_steps=steps, checkpoint_every_steps=4, keep_checkpoints=10,
                  model={**TINY_MODEL, "dropout": 0.1})
    reference = write_job(tmp_path / "reference.yaml", job_yaml_data,
                          checkpoint_dir=str(tmp_path / "reference"), **common)
    killed_dir = tmp_path / "killed"
    killed = write_job(tmp_path / "killed.yaml", job_yaml_data, checkpoint_dir=str(killed_dir),
                       **common)
    # The uninterrupted run (in this process: what matters is the killed one).
    assert run_from_config(reference).final_step == steps

    # Killed between checkpoints, an event rather than a race with the run's speed: the run
    # stops after step 10 (step 8 saved, steps 9 and 10 recorded after it) until it is killed.
    marker, log = tmp_path / "paused", tmp_path / "killed.log"
    with log.open("wb") as output:
        process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(PAUSING_SCRIPT),
                                    str(killed), str(marker), "10"], cwd=REPO, env=SUBPROCESS_ENV,
                                   stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + HUNG
        while not marker.exists():
            assert process.poll() is None and time.monotonic() < deadline, \
                f"the run never reached step 10:\n{log.read_text(errors='replace')[-4000:]}"
            time.sleep(0.2)
        assert marker.read_text() == f"{process.pid} 10"
        assert process.poll() is None  # mid-run: step 10 of 16 done, waiting in its callback
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL
    assert [r["step"] for r in read_metrics(killed_dir)] == list(range(1, 11))
    latest = tf.train.latest_checkpoint(str(killed_dir))
    assert latest is not None and latest.endswith("ckpt-8")

    # The same command again: resumes from the newest checkpoint and finishes the run.
    result = subprocess.run([sys.executable, "-m", "pipelines.training", "--config",
                             str(killed)], cwd=REPO, env=SUBPROCESS_ENV, capture_output=True,
                            text=True, timeout=HUNG)
    assert result.returncode == 0, result.stderr[-6000:]
    resumed_from = int(latest.rsplit("-", 1)[1])
    assert f"resumed from {latest} at step {resumed_from}" in result.stderr
    assert f"training finished at step {steps} ({steps} optimizer steps)" in result.stderr

    reference_history = read_metrics(tmp_path / "reference")
    killed_history = read_metrics(killed_dir)
    assert [r["step"] for r in killed_history] == list(range(1, steps + 1))
    # Same data stream, optimizer state and dropout masks: the same losses and final weights.
    np.testing.assert_allclose([r["loss"] for r in killed_history],
                               [r["loss"] for r in reference_history], rtol=1e-5)
    a = tf.train.load_checkpoint(str(tmp_path / "reference" / f"ckpt-{steps}"))
    b = tf.train.load_checkpoint(str(killed_dir / f"ckpt-{steps}"))
    start = tf.train.load_checkpoint(str(tmp_path / "reference" / f"ckpt-{resumed_from}"))
    assert b.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE") == steps
    # Element-wise equality is too strict across processes: Adam divides by sqrt(v), so a weight
    # whose gradient is near zero moves by about lr whatever the rounding of that gradient.
    # The resumed stretch must instead reproduce the uninterrupted one: the two runs end within
    # 2% of how far the reference moved since the checkpoint the killed run resumed from (here
    # the two agree to ~1e-6 of it; rounding noise on another machine gave 5e-4 element-wise).
    for key in model_keys(a):
        if "/key/bias/" in key:  # see comparable()
            continue
        moved = np.linalg.norm(a.get_tensor(key) - start.get_tensor(key))
        apart = np.linalg.norm(b.get_tensor(key) - a.get_tensor(key))
        assert moved > 0, key
        assert apart <= 0.02 * moved, (key, apart, moved)
