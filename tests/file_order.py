"""The order pytest-xdist hands test files to its workers: the longest first.

``make test`` runs ``--dist loadfile --no-loadscope-reorder``: each file goes whole to one worker,
in collection order. By default xdist orders files by their number of tests, which sends the few
long end-to-end files (a live deployment, the data-stage benchmark, recipe search) last, where one
worker runs them while the other has nothing left. Longest first, the workers finish within a
short file of each other.

``file_durations.json`` holds each file's seconds (setup, call and teardown summed) from a run of
the suite; a file not in it counts as the median. ``pytest --record-file-durations`` updates it with
the files of the run it ends.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("file_durations.json")
_seconds: dict[str, float] = defaultdict(float)


def pytest_addoption(parser):
    parser.addoption("--record-file-durations", action="store_true",
                     help=f"write each test file's seconds in this run to {DURATIONS.name}")


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _known() -> dict[str, float]:
    return json.loads(DURATIONS.read_text(encoding="utf-8")) if DURATIONS.exists() else {}


def pytest_collection_modifyitems(config, items):
    known = _known()
    if not known:
        return
    default = statistics.median(known.values())
    # A stable sort: a file's tests keep their order, and every worker collects the same order.
    items.sort(key=lambda item: -known.get(_file(item.nodeid), default))


def pytest_runtest_logreport(report):
    _seconds[_file(report.nodeid)] += report.duration


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    # On the controller (or a run without workers): it receives every worker's reports.
    if session.config.getoption("record_file_durations") and not hasattr(session.config, "workerinput"):
        known = _known()
        known.update((name, round(seconds, 1)) for name, seconds in _seconds.items())
        ordered = dict(sorted(known.items(), key=lambda entry: -entry[1]))
        DURATIONS.write_text(json.dumps(ordered, indent=0) + "\n", encoding="utf-8")
