"""The resident memory of a process and its descendants, as the benchmarks report it (a server with
its workers, a flow with its stage processes)."""

from __future__ import annotations

from pathlib import Path


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (read from ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # The command name in parentheses may hold spaces: the fields after its closing one.
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:  # ended meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and its descendants in bytes (0 once it has ended)."""
    total = 0
    for member in process_tree(pid):
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:  # ended meanwhile
            pass
    return total
