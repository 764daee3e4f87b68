"""benchmarks/speed/serve_load.py on a tiny served model: 2 s a level, the report's shape, no errors."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from benchmarks.speed import serve_load
from tests.flows.conftest import tiny_pyfunc


def test_the_load_benchmark_reports_each_level_the_memory_and_the_malformed_requests(tokenizer, tmp_path, capsys):
    pyfunc = tiny_pyfunc(tokenizer, tmp_path)
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("The package contains the documentation.\nThis is a library.\n\nRun it with care.\n")
    output = tmp_path / "report.json"
    status = serve_load.main(["--model-uri", str(pyfunc), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
                              "--seconds", "2", "--max-requests", "200", "--sentences", str(sentences),
                              "--threads", "1", "--rows", "2", "--rounds", "2", "--levels", "1,8",
                              "--server-env", "MALLOC_ARENA_MAX=2",
                              "--server-log", str(tmp_path / "server.log"), "--output", str(output)])
    report = json.loads(output.read_text())
    assert json.loads(capsys.readouterr().out) == report
    assert status == 0 and report["errors"] == 0 and report["server"]["answers_after_malformed"]
    assert report["sentences"]["count"] == 3 and (report["threads"], report["rows_per_request"]) == (1, 2)
    assert [level["clients"] for level in report["levels"]] == [1, 8]  # the first round's
    for level in report["levels"]:
        assert level["errors"] == 0 and level["error_kinds"] == {}, level
        assert 1 <= level["answered"] == level["requests"] <= 200
        latency = level["latency_seconds"]
        assert 0 < latency["p50"] <= latency["p95"] <= latency["p99"] <= latency["max"]
        assert level["requests_per_second"] > 0
        assert level["sentences_per_second"] == pytest.approx(2 * level["requests_per_second"], abs=0.02)
    memory = report["memory_mb"]
    assert all(memory[key] > 100 for key in ("ready", "after_load", "after_malformed"))  # TensorFlow is loaded
    assert {"after_load_growth_percent", "after_malformed_growth_percent"} <= set(memory)
    # The worker alone: the model's process, less than the tree that also holds the mlflow parent.
    worker = report["worker_memory_mb"]
    for key in ("ready", "after_first_request", "after_load", "after_malformed"):
        assert 100 < worker[key] < memory[key], key
        roles = Counter(process["role"] for process in report["processes"][key])
        assert roles["server"] == roles["worker"] == 1, report["processes"][key]
        assert worker[key] == pytest.approx(sum(p["rss_mb"] for p in report["processes"][key] if p["role"] == "worker"))
    assert worker["after_malformed_growth_percent"] == round(100 * (worker["after_malformed"] / worker["ready"] - 1), 1)
    first_worker = next(p for p in report["processes"]["ready"] if p["role"] == "worker")
    assert first_worker["threads"] > 1 and 0 < first_worker["anon_mb"] < first_worker["rss_mb"]
    assert report["rounds"][-1]["worker_after_malformed_mb"] == worker["after_malformed"]
    assert report["server_env"] == {"TF_ENABLE_ONEDNN_OPTS": "0", "MALLOC_ARENA_MAX": "2"}  # make serve's, and ours
    assert [r["round"] for r in report["rounds"]] == [1, 2] and all(r["errors"] == 0 for r in report["rounds"])
    assert report["rounds"][-1]["after_malformed_mb"] == memory["after_malformed"]
    assert report["rounds"][1]["requests"] >= 2
    by_case = {case["case"]: case for case in report["malformed"]}
    assert not any(case["traceback"] for case in report["malformed"])
    assert by_case["null source"]["status"] == 400 and "source[0] is null" in by_case["null source"]["message"]
    assert by_case["10,000-character source"]["status"] == 400
    assert by_case["64 sentences (the limit)"]["status"] == 200 and by_case["65 sentences"]["status"] == 400
    assert by_case["2,000-character source (the limit)"]["status"] == 200
    assert report["long_input"]["statuses"] == [200, 200, 200]


def test_percentiles_are_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert [serve_load.percentile(values, q) for q in (50, 95, 99, 100)] == [50.0, 95.0, 99.0, 100.0]
    assert serve_load.percentile([0.3], 99) == 0.3 and serve_load.percentile([], 50) is None


def test_a_server_variable_is_name_equals_value():
    assert serve_load.environment_setting("MALLOC_ARENA_MAX=2") == ("MALLOC_ARENA_MAX", "2")
    with pytest.raises(SystemExit):
        serve_load.main(["--model-uri", "m", "--server-env", "MALLOC_ARENA_MAX"])
