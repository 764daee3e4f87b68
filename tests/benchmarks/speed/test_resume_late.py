"""benchmarks/speed/resume_late.py at a tiny size: a late checkpoint synthesized, resumed from its data
position and by replaying, the report's shape."""

from __future__ import annotations

import json

from tests.commands import run_json
from tests.pipelines.conftest import INPUT, TINY_MODEL


def test_the_late_resume_benchmark_times_the_position_and_the_replay(ddtp_corpus, tokenizer_model, tmp_path):
    # The training tests' input (paragraphs, short pairs): the same id cache, a pass of a few hundred batches.
    input_settings = {**INPUT, "sentence_pairs": "none"}
    output = tmp_path / "report.json"
    report = run_json("-m", "benchmarks.speed.resume_late", "--corpus-dir", ddtp_corpus.directory,
                      "--tokenizer", tokenizer_model, "--work-dir", tmp_path / "work", "--step", 5000,
                      "--model", json.dumps(TINY_MODEL), "--input", json.dumps(input_settings), "--passes", 0.5,
                      "--replay-batches", "4,40", "--repeats", 1, "--output", output,
                      timeout=1800)
    assert json.loads(output.read_text()) == report
    assert report["step"] == 5000 and report["preset"] == "cpu-small"
    synthesized = report["synthesized"]
    assert synthesized["batches_per_step"] >= 1 and synthesized["consumed_batches"] >= 5000
    run = report["position"]["runs"][0]
    assert run["seconds_to_first_update"] > 0 and run["position_restore_seconds"] >= 0
    assert [p["consumed_batches"] for p in report["replay"]["points"]] == [4, 40]
    assert all(p["seconds_to_first_update"] > 0 for p in report["replay"]["points"])
    sizes = report["checkpoint_bytes"]
    assert sizes["with_position"] > sizes["without_position"] > 0 and sizes["position"] > 0
    assert "estimated_seconds_to_first_update_at_step" in report["replay"] and report["machine"]["cpus"]
