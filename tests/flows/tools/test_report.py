"""Every benchmark report names the machine it ran on (flows/tools/report.py): timings from two
machines of the same kind differed 1.8x, so a figure without its machine cannot be compared."""

from __future__ import annotations

import json
from pathlib import Path

from flows.tools import report

emit = report.emit
machine = report.machine


def test_a_report_names_its_cpu_and_keeps_what_it_said_of_its_machine(tmp_path, capsys):
    output = tmp_path / "nested" / "report.json"
    emit({"benchmark": "x", "steps": 3, "machine": {"load_average_at_start": [9.0, 9.0, 9.0]}}, output)
    written = json.loads(output.read_text(encoding="utf-8"))
    assert json.loads(capsys.readouterr().out) == written
    assert written["steps"] == 3
    assert written["machine"]["load_average_at_start"] == [9.0, 9.0, 9.0]
    assert written["machine"]["cpu_model"] == machine()["cpu_model"] != ""
    assert isinstance(written["machine"]["avx512"], bool)
    assert written["machine"]["cpus"] >= 1


def test_the_cpu_model_is_read_from_this_machine():
    found = machine()
    if Path("/proc/cpuinfo").is_file():
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8")
        assert found["cpu_model"] in cpuinfo
        assert found["avx512"] == (" avx512f" in cpuinfo)


def test_a_machine_named_as_a_string_is_kept_beside(tmp_path, capsys):
    emit({"benchmark": "x", "machine": "x86_64"}, tmp_path / "r.json")
    written = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert written["machine_as_reported"] == "x86_64"
    assert written["machine"]["cpus"] >= 1
