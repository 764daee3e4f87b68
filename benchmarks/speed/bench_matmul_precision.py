"""Matmul throughput on this CPU: float32 vs bfloat16 (AVX512_BF16) at Transformer sizes.

The machine reports AVX512_BF16; whether oneDNN turns that into faster matmuls for the shapes a
Transformer multiplies is a measurement, not an assumption. For each size the benchmark times
``[tokens, d_model] @ [d_model, d_ff]`` (the FFN's first matmul, section 3.3) in a compiled
``tf.function`` and reports GFLOP/s (2 * m * k * n flops per matmul), median of ``--repeats``.

    python -m benchmarks.speed.bench_matmul_precision [--repeats 5]

Prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

# (tokens per batch, d_model, d_ff): demo, cpu-small, base and big FFN shapes.
SHAPES = [(4096, 128, 512), (4096, 256, 1024), (4096, 512, 2048), (4096, 1024, 4096)]


def gflops(m, k, n, dtype, repeats, inner=10):
    a = tf.cast(tf.random.normal((m, k)), dtype)
    b = tf.cast(tf.random.normal((k, n)), dtype)

    # One matmul per call: repeating tf.matmul(a, b) inside one graph would let Grappler's
    # common-subexpression elimination compute it once and inflate the figure.
    @tf.function
    def run(a, b):
        return tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32))

    run(a, b).numpy()  # trace and warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        results = [run(a, b) for _ in range(inner)]
        [r.numpy() for r in results]
        times.append(time.perf_counter() - start)
    return 2 * m * k * n * inner / statistics.median(times) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    results = []
    for m, k, n in SHAPES:
        f32 = gflops(m, k, n, tf.float32, args.repeats)
        bf16 = gflops(m, k, n, tf.bfloat16, args.repeats)
        results.append({"m": m, "k": k, "n": n, "float32_gflops": round(f32, 1),
                        "bfloat16_gflops": round(bf16, 1), "bf16_speedup": round(bf16 / f32, 2)})
    print(json.dumps({"benchmark": "matmul_precision", "machine": platform.processor() or platform.machine(),
                      "cpu_count": os.cpu_count(), "tensorflow": tf.__version__, "results": results},
                     indent=2))


if __name__ == "__main__":
    main()
