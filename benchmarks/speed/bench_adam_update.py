"""Adam's update alone, Keras' against the fused kernel, on a preset's variables.

    python -m benchmarks.speed.bench_adam_update [--preset cpu-small] [--rounds 30] [--output PATH]

Times ``optimizer.apply`` (compiled, dense gradients, as the training stage applies its
accumulated gradients) for ``keras.optimizers.Adam`` and
:class:`keras_transformer.training.fused_adam.FusedAdam`, taking turns twice each in one process;
reports the median milliseconds of each. Run it under ``taskset -c 0`` and ``-c 0,1`` to see how
the update divides over cores; the machine should be otherwise idle.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from flows.tools.report import emit


def median_ms(optimizer_class, variables, gradients, rounds: int, warmup: int = 3) -> float:
    import tensorflow as tf

    optimizer = optimizer_class(1e-4, beta_2=0.98, epsilon=1e-9)
    optimizer.build(variables)
    step = tf.function(lambda: optimizer.apply(gradients, variables))
    seconds = []
    for index in range(warmup + rounds):
        tick = time.perf_counter()
        step()
        optimizer.iterations.numpy()  # waits for the update
        if index >= warmup:
            seconds.append(time.perf_counter() - tick)
    return round(statistics.median(seconds) * 1000, 2)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="cpu-small")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--output", type=Path, help="also write the JSON report here")
    args = parser.parse_args(argv)

    import keras
    import numpy as np
    import tensorflow as tf

    import keras_transformer as kt
    from keras_transformer.training.fused_adam import FusedAdam

    model = kt.Transformer.from_preset(args.preset, vocab_size=args.vocab_size)
    model.build()
    variables = model.trainable_variables
    gradients = [tf.random.normal(v.shape) * 1e-3 for v in variables]
    sides = {"keras-adam": keras.optimizers.Adam, "fused-adam": FusedAdam}
    times = {name: [] for name in sides}
    for _ in range(2):  # in turns, so that a drift of the machine touches both
        for name, cls in sides.items():
            times[name].append(median_ms(cls, variables, gradients, args.rounds))
    report = {"benchmark": "adam_update", "preset": args.preset,
              "parameters": int(sum(np.prod(v.shape) for v in variables)), "rounds": args.rounds,
              "milliseconds": {name: min(values) for name, values in times.items()}, "each_turn": times,
              "tensorflow": tf.__version__, "keras": keras.__version__}
    report["speedup"] = round(report["milliseconds"]["keras-adam"] / report["milliseconds"]["fused-adam"], 2)
    emit(report, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
