"""The process-tree memory the benchmarks report: a child's memory counts."""

import os
import subprocess
import sys
from pathlib import Path

from flows.tools.process_memory import process_status, process_tree, tree_rss_bytes, tree_statuses


def _own_rss(pid: int) -> int:
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def test_the_tree_holds_this_process_and_its_children_and_their_memory():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        tree = process_tree(os.getpid())
        assert tree[0] == os.getpid() and child.pid in tree
        assert tree_rss_bytes(os.getpid()) > _own_rss(os.getpid()) + _own_rss(child.pid) // 2
    finally:
        child.kill()
        child.wait()
    assert tree_rss_bytes(child.pid) == 0  # ended: nothing to count


def test_each_process_of_the_tree_reports_its_parent_memory_and_threads():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        statuses = {status["pid"]: status for status in tree_statuses(os.getpid())}
        mine, its = statuses[os.getpid()], statuses[child.pid]
        assert its["ppid"] == os.getpid() and its["name"].startswith("python")
        assert its["rss_bytes"] == its["anon_bytes"] + its["file_bytes"] + _shmem(child.pid) > 0
        assert mine["threads"] >= 1 and abs(mine["rss_bytes"] - _own_rss(os.getpid())) < 2**24
    finally:
        child.kill()
        child.wait()
    assert process_status(child.pid) is None and tree_statuses(child.pid) == []


def _shmem(pid: int) -> int:
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("RssShmem:"))
    return int(line.split()[1]) * 1024
