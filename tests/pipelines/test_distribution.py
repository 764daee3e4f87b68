"""Strategy construction, TF_CONFIG parsing and the logical-CPU split (in a subprocess: the
device layout is fixed per process, and this test session has initialised TensorFlow)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tensorflow as tf

from pipelines.distribution import (
    DistributionError,
    build_strategy,
    cluster_info,
    describe_strategy,
    has_cluster,
    split_cpu,
)

REPO = Path(__file__).resolve().parents[2]


def tf_config(workers: int, index: int, chief: bool = False) -> dict[str, str]:
    cluster = {"worker": [f"127.0.0.1:{2000 + i}" for i in range(workers)]}
    if chief:
        cluster["chief"] = ["127.0.0.1:1999"]
    return {"TF_CONFIG": json.dumps({"cluster": cluster,
                                     "task": {"type": "worker", "index": index}})}


def test_cluster_info_from_tf_config():
    assert cluster_info({}).num_workers == 1 and cluster_info({}).is_chief
    assert not has_cluster({})
    first, second = cluster_info(tf_config(2, 0)), cluster_info(tf_config(2, 1))
    assert first.num_workers == second.num_workers == 2
    assert first.is_chief and not second.is_chief
    # With a chief task, worker 0 is not the chief.
    assert not cluster_info(tf_config(2, 0, chief=True)).is_chief
    assert cluster_info(tf_config(2, 0, chief=True)).num_workers == 3
    assert has_cluster(tf_config(2, 1)) and not has_cluster(tf_config(1, 0))
    with pytest.raises(DistributionError, match="TF_CONFIG is not valid JSON"):
        cluster_info({"TF_CONFIG": "{cluster"})


def test_local_strategies(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    auto = build_strategy("auto")
    assert isinstance(auto, tf.distribute.MirroredStrategy)
    # No GPU on this machine: one replica on the CPU.
    assert auto.num_replicas_in_sync == 1
    assert describe_strategy(auto)["kind"] == "mirrored"
    one = build_strategy("one_device")
    assert isinstance(one, tf.distribute.OneDeviceStrategy)
    assert describe_strategy(one) == {"kind": "one_device", "class": "OneDeviceStrategy",
                                      "replicas": 1, "workers": 1, "task_type": None,
                                      "task_id": 0}
    with pytest.raises(DistributionError, match="unknown strategy"):
        build_strategy("parameter_server")
    with pytest.raises(DistributionError, match="exactly one device"):
        build_strategy("one_device", devices=["/cpu:0", "/cpu:1"])
    with pytest.raises(DistributionError, match="takes no `devices`"):
        build_strategy("multi_worker", devices=["/cpu:0"])


def test_split_cpu_after_tensorflow_started_is_a_clear_error():
    tf.constant(1.0)  # TensorFlow has initialised its devices in this process.
    with pytest.raises(DistributionError, match="before creating any tensor"):
        split_cpu(len(tf.config.list_logical_devices("CPU")) + 3)


SPLIT_SCRIPT = """
    import json, sys
    from pipelines.distribution import DistributionError, build_strategy, split_cpu
    names = split_cpu(3)
    again = split_cpu(3)  # harmless with the same number
    strategy = build_strategy("mirrored", devices=names)
    import tensorflow as tf
    per_replica = strategy.run(lambda: tf.distribute.get_replica_context().replica_id_in_sync_group)
    ids = sorted(int(x) for x in strategy.experimental_local_results(per_replica))
    try:
        split_cpu(2)
        late = None
    except DistributionError as err:
        late = str(err)
    with open(sys.argv[1], "w") as f:
        json.dump({"names": names, "again": again, "replicas": strategy.num_replicas_in_sync,
                   "ids": ids, "late": late}, f)
"""


def test_split_cpu_gives_a_multi_replica_mirrored_strategy(tmp_path):
    out = tmp_path / "out.json"
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(SPLIT_SCRIPT), str(out)],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-4000:]
    data = json.loads(out.read_text())
    assert len(data["names"]) == 3 and data["again"] == data["names"]
    assert all("CPU" in name for name in data["names"])
    assert data["replicas"] == 3 and data["ids"] == [0, 1, 2]
    assert "already initialised 3 CPU device(s)" in data["late"]
