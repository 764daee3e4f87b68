"""benchmarks/probes/hostile_inputs.py run as a user runs it, on parse-eval's cases (no TensorFlow,
a second or two): each case's record, and every case refused in one line with exit status 2."""

from __future__ import annotations

import json

from benchmarks.probes import hostile_inputs
from tests.commands import run_json


def test_the_hostile_inputs_report_records_each_case_as_a_user_sees_it(tmp_path):
    output = tmp_path / "hostile.json"
    report = run_json("-m", "benchmarks.probes.hostile_inputs", "--groups", "parse-eval", "--timeout", "300",
                      "--output", output)
    assert json.loads(output.read_text()) == report
    records = report["records"]
    assert report["groups"] == ["parse-eval"] and report["cases"] == len(records) == 8
    assert report["summary"]["parse-eval"] == {"cases": 8, "ok": 8, "not_ok": []}, records
    for record in records:
        assert record["exit_status"] == 2 and record["stderr_lines"] == 1 and not record["traceback"], record
        assert record["stderr_first_line"].startswith("parse-eval: error: "), record
        assert record["command"].startswith("parse-eval ") and "<tmp>" in record["command"], record
    by_case = {record["case"]: record for record in records}
    empty = by_case["two empty files"]["stderr_first_line"]
    assert empty == "parse-eval: error: no trees in <tmp>/parse-eval/empty.trees"
    assert "invalid UTF-8 at byte 15" in by_case["invalid UTF-8"]["stderr_first_line"]


def test_the_served_cases_name_what_each_request_should_get():
    cases = {name: expect for name, _, _, expect in hostile_inputs.served_cases()}
    assert cases["wrong column"] == cases["null source"] == cases["65 sentences"] == "refused"
    assert cases["64 sentences (the limit)"] == cases["empty data"] == "answered"
    assert len(cases) == len(hostile_inputs.served_cases())  # no case named twice
