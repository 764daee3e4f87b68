"""Training throughput beside keras-hub: on identical batches (speed, MFU) and as each is used (real tokens/s).

    python -m benchmarks.peers.bench_training_vs_kerashub [--steps 30] [--modes identical,natural]

Every variant is built in this one process and the variants take their steps in turn (one step
each, round after round), so this machine's drift (+-20% between runs) hits them alike; the
figures are medians over ``--steps`` rounds after ``--warmup`` rounds of tracing.

``identical``: every variant trains on the same keras.io batches (64 sentences padded to 64
tokens, our shared vocabulary), with the same dropout and Adam:
  * ``kerashub-fit``: keras-hub's model (``kerashub_peer``) through Keras' compiled train
    function, the step ``model.fit`` runs;
  * ``ours-fit``: our Transformer (cpu-small's shape) through the same;
  * ``ours-trainer``: our training stage's step (``pipelines.training``: forward and backward,
    gradient accumulation, finiteness check and update under the tf.distribute strategy).
Reported: seconds per step, speed relative to ``kerashub-fit`` and MFU (matmul FLOPs of the
padded step over this process' measured float32 matmul peak; ``executed_mfu`` leaves out the
output-layer work our trainer skips at padding).

``natural``: each side as its user runs it on the bundled DDTP En-De corpus (our tokenizer for
both, so the batching alone differs): keras-hub's model through ``fit``'s step on keras.io batches
(64 sentences padded to 64, longer pairs dropped), ours through the trainer on token buckets of
cpu-small's input settings (2,048 target tokens per step, pairs up to 128 tokens). Reported: real
(non-padding) target tokens per second, padding fractions and the ratio.

Prints one JSON object. Needs keras-hub (the test extras have it).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras
import tensorflow as tf

from benchmarks.peers.kerashub_peer import (
    add_data_arguments,
    add_model_arguments,
    corpus_and_tokenizer,
    fixed_batches,
    kerashub_model,
    matmul_peak,
    step_flops,
    tokenized_rows,
)
from flows.tools.report import emit
from keras_transformer import Transformer
from keras_transformer.training.objectives import TranslationObjective

logger = logging.getLogger("bench_training_vs_kerashub")


class FitStep:
    """One ``model.fit`` step: Keras' compiled train function on the next batch of a dataset."""

    def __init__(self, model, batches, learning_rate, ours: bool):
        if ours:
            # Our Transformer's loss without label smoothing: the same objective as keras-hub's.
            model.compile(optimizer=adam(learning_rate), label_smoothing=0.0, metrics=[], jit_compile=False)
        else:
            model.compile(optimizer=adam(learning_rate), jit_compile=False,
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0))
        dataset = tf.data.Dataset.from_tensor_slices(tuple(tf.stack(x) for x in zip(*batches))).repeat()
        # Both models take the two inputs by name.
        self.iterator = iter(dataset.map(lambda s, t, o: ({"source_ids": s, "target_ids": t}, o)))
        model.make_train_function()
        self.model = model

    def __call__(self):
        self.model.train_function(self.iterator)["loss"].numpy()


class TrainerStep:
    """One optimizer step of our training stage on the next batch(es) of ``dataset``."""

    def __init__(self, arch, vocab, dataset, tokens_per_step, work_dir, one_batch, cpu_devices=None):
        from pipelines.training import TrainConfig, build_configured_strategy
        from pipelines.training.data import distributed_dataset
        from pipelines.training.runner import build_model
        from pipelines.training.steps import StepFunctions
        from pipelines.vocabulary import Vocabulary

        config = TrainConfig(preset="cpu-small", model=arch, label_smoothing=0.0, train_minutes=0,
                             tokens_per_step=tokens_per_step, accumulation_batches=1 if one_batch else None,
                             checkpoint_dir=str(work_dir), progress_bar=False, cpu_devices=cpu_devices)
        plan, strategy = config.resolved(), build_configured_strategy(config)
        model, optimizer = build_model(config, Vocabulary(vocab), strategy)
        dist = distributed_dataset(strategy, dataset)
        self.steps = StepFunctions(strategy, model, optimizer, dist.element_spec,
                                   objective=TranslationObjective(model, plan.label_smoothing),
                                   tokens_per_step=plan.tokens_per_batch,
                                   accumulation_batches=config.accumulation_batches)
        self.iterator = iter(dist)
        self.tokens = 0.0

    def __call__(self):
        totals, _ = self.steps.accumulate_step(self.iterator)
        self.tokens = float(totals[1])
        self.steps.apply(tf.constant(self.tokens, tf.float32))


def adam(learning_rate):
    return keras.optimizers.Adam(learning_rate, beta_1=0.9, beta_2=0.98, epsilon=1e-9)


def interleave(steps: dict, rounds: int, warmup: int) -> dict[str, list[float]]:
    """Seconds of every variant's step, the variants taking turns."""
    seconds = {name: [] for name in steps}
    for index in range(warmup + rounds):
        for name, step in steps.items():
            tick = time.perf_counter()
            step()
            if index >= warmup:
                seconds[name].append(time.perf_counter() - tick)
    return seconds


def real_target_tokens(batch) -> int:
    return int(tf.math.count_nonzero(batch[2]))


def identical(args, data, vocab, arch, work_dir: Path) -> dict:
    batches = fixed_batches(data["rows"], args.batch, args.length, limit=args.steps + args.warmup)
    keras.utils.set_random_seed(0)
    hub = kerashub_model(vocab, arch["d_model"], arch["num_heads"], arch["d_ff"], arch["num_layers"],
                         arch["dropout"], args.length)
    ours = Transformer(vocab_size=vocab, **arch)
    dataset = tf.data.Dataset.from_tensor_slices(tuple(tf.stack(x) for x in zip(*batches)))
    dataset = dataset.map(lambda s, t, o: ((s, t), o))
    steps = {
        "kerashub-fit": FitStep(hub, batches, args.learning_rate, ours=False),
        "ours-fit": FitStep(ours, batches, args.learning_rate, ours=True),
        "ours-trainer": TrainerStep(arch, vocab, dataset, args.batch * args.length, work_dir / "identical",
                                    one_batch=True),
    }
    seconds = interleave(steps, args.steps, args.warmup)
    flops = step_flops(args.batch, args.length, vocab, arch["d_model"], arch["d_ff"], arch["num_layers"])
    peak = matmul_peak()
    hub_seconds = statistics.median(seconds["kerashub-fit"])
    report = {"batch": [args.batch, args.length], "matmul_peak_gflops": round(peak / 1e9, 1),
              "step_gflops": round(flops / 1e9, 2), "variants": {}}
    # Our trainer projects onto the vocabulary only at real target tokens: it skips that share of
    # the padded step's output-layer work, which its "mfu" (the padded step's FLOPs per second,
    # the work it stands in for) still counts and "executed_mfu" does not.
    padding = 1 - sum(real_target_tokens(b) for b in batches) / (len(batches) * args.batch * args.length)
    skipped = 3 * 2 * args.batch * args.length * arch["d_model"] * vocab * padding
    for name, values in seconds.items():
        median = statistics.median(values)
        executed = flops - (skipped if name == "ours-trainer" else 0)
        report["variants"][name] = {
            "seconds_per_step": round(median, 4),
            "padded_target_tokens_per_second": round(args.batch * args.length / median, 1),
            "speed_vs_kerashub_fit": round(hub_seconds / median, 3),
            "gflops_per_second": round(flops / median / 1e9, 1),
            "mfu": round(flops / median / peak, 3),
            "executed_mfu": round(executed / median / peak, 3),
        }
    report["target_padding"] = round(padding, 3)
    return report


def natural(args, data, vocab, arch, work_dir: Path) -> dict:
    batches = fixed_batches(data["rows"], args.batch, args.length, limit=args.steps + args.warmup)
    buckets = data["buckets"]
    keras.utils.set_random_seed(0)
    hub = kerashub_model(vocab, arch["d_model"], arch["num_heads"], arch["d_ff"], arch["num_layers"],
                         arch["dropout"], args.length)
    hub_step = FitStep(hub, batches, args.learning_rate, ours=False)
    ours_step = TrainerStep(arch, vocab, buckets, args.tokens_per_step, work_dir / "natural", one_batch=False,
                            cpu_devices=args.cpu_devices)
    hub_tokens = [real_target_tokens(b) for b in batches]
    tokens = {"kerashub-fit": [], "ours-trainer": []}

    def hub_call():
        hub_step()
        tokens["kerashub-fit"].append(hub_tokens[len(tokens["kerashub-fit"]) % len(hub_tokens)])

    def ours_call():
        ours_step()
        tokens["ours-trainer"].append(ours_step.tokens)

    seconds = interleave({"kerashub-fit": hub_call, "ours-trainer": ours_call}, args.steps, args.warmup)
    report = {"variants": {}}
    for name in seconds:
        measured = tokens[name][args.warmup:]
        report["variants"][name] = {
            "seconds_per_step": round(statistics.median(seconds[name]), 4),
            "real_target_tokens_per_step": round(statistics.mean(measured), 1),
            "real_target_tokens_per_second": round(sum(measured) / sum(seconds[name]), 1),
        }
    hub_padding = 1 - sum(hub_tokens) / (len(hub_tokens) * args.batch * args.length)
    report["variants"]["kerashub-fit"]["target_padding"] = round(hub_padding, 3)
    report["variants"]["ours-trainer"]["target_padding"] = round(data["bucket_padding"], 3)
    report["real_tokens_ratio"] = round(report["variants"]["ours-trainer"]["real_target_tokens_per_second"]
                                        / report["variants"]["kerashub-fit"]["real_target_tokens_per_second"], 3)
    report["setup"] = {"kerashub": f"{args.batch} sentences padded to {args.length}, longer pairs dropped",
                       "ours": f"token buckets, {args.tokens_per_step} target tokens per step, pairs up to "
                               f"{args.max_length} tokens"}
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="identical,natural")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    add_model_arguments(parser)
    parser.add_argument("--tokens-per-step", type=int, default=2048)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--cpu-devices", type=int, help="natural mode: our trainer mirrored over this many logical "
                        "CPU devices (the training setting train.cpu_devices)")
    add_data_arguments(parser, "runs/bench-training")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.cpu_devices:
        from pipelines.distribution import split_cpu

        split_cpu(args.cpu_devices)  # before TensorFlow's first tensor

    corpus, tokenizer = corpus_and_tokenizer(args)
    # Everything that tokenizes comes before the models: seeding them resets the tokenizer's
    # resources (tensorflow/text#570).
    from pipelines.input_pipeline import InputConfig, make_dataset
    from pipelines.input_reports import padding_fraction

    input_config = InputConfig(tokens_per_batch=args.tokens_per_step, max_length=args.max_length)
    data = {"rows": tokenized_rows(corpus, "train", tokenizer),
            "buckets": make_dataset(corpus, "train", tokenizer, input_config, training=True),
            "bucket_padding": padding_fraction(make_dataset(corpus, "train", tokenizer, input_config,
                                                            training=False), 0, max_batches=300)["target"]}
    arch = dict(num_layers=args.layers, d_model=args.d_model, num_heads=args.heads, d_ff=args.ffn,
                dropout=args.dropout)
    report = {"setup": {k: str(v) for k, v in vars(args).items()}, "tensorflow": tf.__version__,
              "keras": keras.__version__}
    with tempfile.TemporaryDirectory() as scratch:
        for mode in args.modes.split(","):
            logger.info("mode %s", mode)
            report[mode] = {"identical": identical, "natural": natural}[mode](args, data, tokenizer.vocab_size,
                                                                             arch, Path(scratch))
    emit(report, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
