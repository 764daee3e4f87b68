"""Learning per update and per second: our Transformer beside keras-hub's, on identical batches.

    python -m benchmarks.peers.bench_learning_vs_kerashub [--steps 300] [--variants tied,untied]

Both models get the same batches (the bundled DDTP En-De corpus, our shared SentencePiece
vocabulary, 64 sentences padded to 64 tokens: keras.io's recipe), the same optimizer (Adam at a
constant 5e-4, beta_2 0.98, the baseline's), the same loss (cross-entropy per real target
token, no label smoothing) and the same dropout; the steps alternate between the models, so
the machine's drift hits both alike. keras-hub's model is the one of
the keras-hub baseline script (``kerashub_seq2seq/train.py``): learned positions, separate input, output and
target embeddings. Ours is the ``cpu-small`` architecture with its variants (``tied``: the
paper's shared, sqrt(d_model)-scaled embeddings, section 3.4; ``untied``: a separate
pre-softmax projection; ``learned``: learned positions). Prints JSON (loss at checkpoints of
the run, validation loss, seconds per step) and writes a PNG of loss per step and per second.
Needs ``pip install keras-hub`` (optional benchmark dependency).
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras
import numpy as np
import tensorflow as tf

import benchmarks.peers.kerashub_peer as peer
from flows.tools.report import emit
from keras_transformer import Transformer

logger = logging.getLogger("bench_learning")
VARIANTS = {
    "tied": {},
    "untied": {"tie_output_embeddings": False},
    "learned": {"positional_encoding": "learned", "max_length": 128},
}


def step_functions(model, learning_rate):
    optimizer = keras.optimizers.Adam(learning_rate, beta_1=0.9, beta_2=0.98, epsilon=1e-9)

    def token_loss(target_out, logits):
        mask = tf.cast(target_out != 0, tf.float32)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(target_out, tf.cast(logits, tf.float32))
        return tf.reduce_sum(losses * mask) / tf.reduce_sum(mask)

    @tf.function(reduce_retracing=True)
    def train_step(source, target_in, target_out):
        with tf.GradientTape() as tape:
            loss = token_loss(target_out, model({"source_ids": source, "target_ids": target_in}, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        return loss

    @tf.function(reduce_retracing=True)
    def eval_step(source, target_in, target_out):
        return token_loss(target_out, model({"source_ids": source, "target_ids": target_in}, training=False))

    return train_step, eval_step


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--variants", default="tied", help=f"ours: comma list of {sorted(VARIANTS)}")
    peer.add_model_arguments(parser)
    parser.add_argument("--eval-every", type=int, default=50)
    peer.add_data_arguments(parser, "runs/bench-learning")
    parser.add_argument("--plot", type=Path, help="PNG path (default: <work-dir>/learning.png)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    corpus, tokenizer = peer.corpus_and_tokenizer(args)
    train = peer.fixed_batches(peer.tokenized_rows(corpus, "train", tokenizer), args.batch, args.length,
                               limit=args.steps)
    validation = peer.fixed_batches(peer.tokenized_rows(corpus, "validation", tokenizer), args.batch, args.length,
                                    limit=10, shuffle=False)
    vocab = tokenizer.vocab_size

    arch = dict(num_layers=args.layers, d_model=args.d_model, num_heads=args.heads, d_ff=args.ffn,
                dropout=args.dropout)
    # After tokenizing: seeding resets tensorflow_text resources (tensorflow/text#570).
    keras.utils.set_random_seed(0)
    models = {"kerashub": peer.kerashub_model(vocab, args.d_model, args.heads, args.ffn, args.layers,
                                         args.dropout, args.length)}
    for name in args.variants.split(","):
        models[f"ours-{name}"] = Transformer(vocab_size=vocab, **arch, **VARIANTS[name])
    runs = {}
    for name, model in models.items():
        model({"source_ids": train[0][0], "target_ids": train[0][1]})
        train_step, eval_step = step_functions(model, args.learning_rate)
        train_step(*train[0])  # trace outside the clock (also the first update, for all alike)
        runs[name] = {"train": train_step, "eval": eval_step, "params": model.count_params(),
                      "loss": [], "seconds": [], "validation": []}
    for step, batch in enumerate(train[1:], start=2):
        for run in runs.values():
            tick = time.perf_counter()
            run["loss"].append(float(run["train"](*batch)))
            run["seconds"].append(time.perf_counter() - tick)
            if step % args.eval_every == 0:
                run["validation"].append((step, float(np.mean([run["eval"](*b) for b in validation]))))
        if step % args.eval_every == 0:
            logger.info("step %d: %s", step, {n: round(r["validation"][-1][1], 3) for n, r in runs.items()})

    def window(values, end, width=20):
        return round(float(np.mean(values[max(end - width, 0):end])), 4)

    marks = [m for m in (50, 100, 200, 300, 500, 1000) if m <= len(train) - 1]
    report = {"setup": vars(args) | {"vocab": vocab},
              "models": {}}
    for name, run in runs.items():
        report["models"][name] = {
            "params": run["params"],
            "seconds_per_step": round(float(np.median(run["seconds"])), 4),
            "train_loss_at_step": {m: window(run["loss"], m) for m in marks},
            "validation_loss": dict(run["validation"]),
        }
    hub = report["models"]["kerashub"]["seconds_per_step"]
    flops = peer.step_flops(args.batch, args.length, vocab, args.d_model, args.ffn, args.layers)
    peak = peer.matmul_peak()
    report["matmul_peak_gflops"] = round(peak / 1e9, 1)
    for entry in report["models"].values():
        entry["speed_vs_kerashub"] = round(hub / entry["seconds_per_step"], 3)
        entry["mfu"] = round(flops / entry["seconds_per_step"] / peak, 3)
    plot(runs, args.plot or args.work_dir / "learning.png")
    emit(report, indent=1)
    return 0


def plot(runs, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(11, 4))
    for name, run in runs.items():
        width = min(10, len(run["loss"]))
        smooth = np.convolve(run["loss"], np.ones(width) / width, mode="valid")
        by_step.plot(np.arange(len(smooth)) + width + 1, smooth, label=name)
        by_time.plot(np.cumsum(run["seconds"])[width - 1:], smooth, label=name)
    by_step.set(xlabel="update", ylabel="training loss (nats/token)", title="per update")
    by_time.set(xlabel="seconds of training", title="per second")
    by_step.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    raise SystemExit(main())
