"""tf.distribute strategies for training: one machine's devices, a cluster, or one device.

The paper trained on "one machine with 8 NVIDIA P100 GPUs" (section 5.2): synchronous data
parallelism, every replica holding a copy of the model and the gradients summed across replicas
before each update. ``MirroredStrategy`` does exactly that on one machine;
``MultiWorkerMirroredStrategy`` extends it over several machines (described by the ``TF_CONFIG``
environment variable), which is how a user outgrows one machine without changing the training
code. ``OneDeviceStrategy`` pins everything to a single device on request.

``split_cpu`` turns the CPU into several logical devices so that multi-replica code paths can be
exercised (tests, demos) on a machine without GPUs. TensorFlow fixes its devices the first time
it touches them, so it must run before any tensor, dataset or model is created.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: reading the settings must not import it
    import tensorflow as tf

logger = logging.getLogger(__name__)

STRATEGY_KINDS = ("auto", "mirrored", "multi_worker", "one_device")


class DistributionError(RuntimeError):
    """A strategy cannot be built as requested; the message says why and what to do."""


def split_cpu(num_devices: int) -> list[str]:
    """Splits the first physical CPU into ``num_devices`` logical devices; returns their names.

    Must be called before TensorFlow initialises its devices (before the first tensor, dataset,
    variable or model of the process). Calling it again with the same number is harmless;
    with a different number after initialisation it raises ``DistributionError``.
    """
    import tensorflow as tf

    if not isinstance(num_devices, int) or num_devices < 1:
        raise DistributionError(f"num_devices must be a positive integer, got {num_devices!r}")
    cpus = tf.config.list_physical_devices("CPU")
    if not cpus:
        raise DistributionError("TensorFlow sees no CPU device")
    wanted = [tf.config.LogicalDeviceConfiguration() for _ in range(num_devices)]
    try:
        tf.config.set_logical_device_configuration(cpus[0], wanted)
    except RuntimeError as err:
        logical = tf.config.list_logical_devices("CPU")
        if len(logical) == num_devices:
            return [d.name for d in logical]
        raise DistributionError(
            f"cannot split the CPU into {num_devices} logical devices: TensorFlow already "
            f"initialised {len(logical)} CPU device(s) in this process. Call split_cpu() before "
            "creating any tensor, dataset or model (for example first thing in the script, or "
            "through the training CLI's `cpu_devices` setting)."
        ) from err
    names = [d.name for d in tf.config.list_logical_devices("CPU")]
    logger.info("split the CPU into %d logical devices: %s", num_devices, names)
    return names


@dataclass(frozen=True)
class ClusterInfo:
    """This process' place in a ``TF_CONFIG`` cluster (a single process when no cluster)."""

    task_type: str | None
    task_id: int
    num_workers: int
    has_chief_task: bool = False

    @property
    def is_chief(self) -> bool:
        """The chief writes checkpoints, logs and metrics; the other workers only compute.

        As in Keras' own convention, the chief is the ``chief`` task when the cluster has one,
        otherwise worker 0.
        """
        return self.task_type in (None, "chief") or (
            self.task_type == "worker" and self.task_id == 0 and not self.has_chief_task
        )


def read_tf_config(environ: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The parsed ``TF_CONFIG`` (``None`` when unset or empty); malformed JSON is an error."""
    raw = (os.environ if environ is None else environ).get("TF_CONFIG", "").strip()
    if not raw:
        return None
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as err:
        raise DistributionError(f"TF_CONFIG is not valid JSON: {err}") from err
    if not isinstance(config, dict):
        raise DistributionError(f"TF_CONFIG must be a JSON object, got {type(config).__name__}")
    return config


def cluster_info(environ: dict[str, str] | None = None) -> ClusterInfo:
    """Task type, id and number of workers (chief included) described by ``TF_CONFIG``."""
    config = read_tf_config(environ)
    cluster = (config or {}).get("cluster") or {}
    task = (config or {}).get("task") or {}
    num_workers = sum(len(cluster.get(kind, [])) for kind in ("chief", "worker"))
    if not cluster or num_workers == 0:
        return ClusterInfo(task_type=None, task_id=0, num_workers=1)
    return ClusterInfo(
        task_type=task.get("type"),
        task_id=int(task.get("index", 0)),
        num_workers=num_workers,
        has_chief_task=bool(cluster.get("chief")),
    )


def has_cluster(environ: dict[str, str] | None = None) -> bool:
    """Whether ``TF_CONFIG`` describes a cluster of more than one worker."""
    return cluster_info(environ).num_workers > 1


def build_strategy(kind: str = "auto", devices: list[str] | None = None) -> tf.distribute.Strategy:
    """Builds the tf.distribute strategy of the training stage.

    Args:
        kind: ``"auto"`` (``MultiWorkerMirroredStrategy`` when ``TF_CONFIG`` describes a
            cluster, otherwise ``MirroredStrategy``), ``"mirrored"``, ``"multi_worker"`` or
            ``"one_device"``.
        devices: the devices of ``mirrored`` (default: every local GPU, or the CPU as a single
            replica when there is none) or the one device of ``one_device`` (default: the first
            GPU, else the CPU). Use ``split_cpu`` first to mirror over logical CPU devices.

    ``MultiWorkerMirroredStrategy`` must be created before TensorFlow runs any operation in the
    process (it configures the collective ops); build it first thing.
    """
    import tensorflow as tf

    if kind not in STRATEGY_KINDS:
        raise DistributionError(f"unknown strategy {kind!r}; use one of {STRATEGY_KINDS}")
    if kind == "auto":
        kind = "multi_worker" if has_cluster() else "mirrored"
    if kind == "multi_worker":
        if devices:
            raise DistributionError(
                "multi_worker uses every local GPU of each worker (or its CPU); it takes no "
                f"`devices`, got {devices}"
            )
        try:
            strategy = tf.distribute.MultiWorkerMirroredStrategy()
        except (RuntimeError, ValueError) as err:
            raise DistributionError(
                "could not create MultiWorkerMirroredStrategy; it must be created before "
                f"TensorFlow runs any operation in this process ({err})"
            ) from err
    else:
        # Listing devices initialises TensorFlow's context: only after the multi-worker branch,
        # which must configure collective ops first.
        strategy = _local_strategy(kind, devices)
    described = describe_strategy(strategy)
    logger.info("strategy: %s (%s), %d replica(s) on %d worker(s)%s", described["kind"], described["class"],
                described["replicas"], described["workers"],
                f", this one {described['task_type']} {described['task_id']}" if described["task_type"] else "")
    return strategy


def _local_strategy(kind: str, devices: list[str] | None) -> tf.distribute.Strategy:
    import tensorflow as tf

    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    if kind == "one_device":
        if devices and len(devices) != 1:
            raise DistributionError(f"one_device takes exactly one device, got {devices}")
        device = devices[0] if devices else (gpus[0] if gpus else "/cpu:0")
        strategy = tf.distribute.OneDeviceStrategy(device)
    else:
        # Without GPUs MirroredStrategy would pick the CPU anyway; naming it keeps the choice
        # explicit and independent of logical CPU splits the user did not ask to mirror over.
        devices = list(devices) if devices else (gpus or ["/cpu:0"])
        strategy = tf.distribute.MirroredStrategy(devices)
    return strategy


def describe_strategy(strategy: tf.distribute.Strategy) -> dict[str, Any]:
    """A small JSON-able description (kind, replicas, workers, task) for logs and run params."""
    import tensorflow as tf

    info = strategy_cluster_info(strategy)
    if is_multi_worker(strategy):
        kind = "multi_worker"
    elif isinstance(strategy, tf.distribute.OneDeviceStrategy):
        kind = "one_device"
    elif isinstance(strategy, tf.distribute.MirroredStrategy):
        kind = "mirrored"
    else:
        kind = "other"
    return {
        "kind": kind,
        "class": type(strategy).__name__,
        "replicas": int(strategy.num_replicas_in_sync),
        "workers": info.num_workers,
        "task_type": info.task_type,
        "task_id": info.task_id,
    }


def is_multi_worker(strategy: tf.distribute.Strategy) -> bool:
    import tensorflow as tf

    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def strategy_cluster_info(strategy: tf.distribute.Strategy) -> ClusterInfo:
    """``cluster_info()`` for a multi-worker strategy, a single chief process otherwise."""
    if is_multi_worker(strategy):
        return cluster_info()
    return ClusterInfo(task_type=None, task_id=0, num_workers=1)
