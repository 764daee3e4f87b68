"""The process-tree memory the benchmarks report: a child's memory counts."""

import os
import subprocess
import sys
from pathlib import Path

from flows.tools.process_memory import process_tree, tree_rss_bytes


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
