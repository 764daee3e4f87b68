"""The tf.distribute strategy a training config asks for."""

from __future__ import annotations

import tensorflow as tf

from pipelines.distribution import build_strategy, has_cluster, split_cpu
from pipelines.training.config import TrainConfig


def build_configured_strategy(config: TrainConfig) -> tf.distribute.Strategy:
    """The strategy of ``config``; with ``cpu_devices`` the CPU is split and mirrored over.

    Splitting only works before TensorFlow initialises its devices (else a clear
    ``DistributionError``), which the CLI guarantees by calling this first.
    """
    kind = config.strategy
    if kind == "auto":
        kind = "multi_worker" if has_cluster() else "mirrored"
    devices = config.devices
    if config.cpu_devices:
        names = split_cpu(config.cpu_devices)
        if devices is None and kind == "mirrored":
            devices = names
    return build_strategy(kind, devices)
