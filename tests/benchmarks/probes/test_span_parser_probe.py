"""benchmarks/probes/span_parser_probe.py's wiring check at a tiny size: both of its numbers reported."""

from __future__ import annotations

import json

import pytest

from tests.commands import run_json


@pytest.mark.slow
def test_span_parser_probe_wiring_check_reports_both_numbers(toy_treebank, tmp_path):
    report = run_json("-m", "benchmarks.probes.span_parser_probe", "--treebank", toy_treebank, "--smoke",
                      "--output", tmp_path / "span.json", timeout=900)
    assert report["wiring"] is True and report["training"]["steps"] == 40
    assert report["train_trees"]["sentences"] == 10 and 0 <= report["train_trees"]["f1"] <= 100
    assert report["overfit_passed"] == (report["train_trees"]["f1"] >= 95.0)
    loss = report["loss"]
    assert report["source_check_passed"] == (loss["source_zeroed"] > loss["with_source"] + 1.0)
    assert json.loads((tmp_path / "span.json").read_text()) == report
