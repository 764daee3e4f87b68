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


#: The lines of ``/proc/PID/status`` :func:`process_status` reads, by the name it gives them.
_STATUS_FIELDS = {"PPid": "ppid", "VmRSS": "rss_bytes", "RssAnon": "anon_bytes", "RssFile": "file_bytes",
                  "Threads": "threads"}


def process_status(pid: int) -> dict | None:
    """``pid``'s command name, parent, resident memory (all, anonymous: the heaps, file-backed: the
    libraries) in bytes and thread count, from ``/proc/PID/status``; None once it has ended."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    status = {"pid": pid}
    for line in lines:
        key, _, value = line.partition(":")
        if key == "Name":
            status["name"] = value.strip()
        elif key in _STATUS_FIELDS:
            number = int(value.split()[0])
            status[_STATUS_FIELDS[key]] = number * 1024 if value.strip().endswith("kB") else number
    return status


def tree_statuses(pid: int) -> list[dict]:
    """:func:`process_status` of ``pid`` and each descendant still running, ``pid`` first."""
    return [status for status in map(process_status, process_tree(pid)) if status is not None]
