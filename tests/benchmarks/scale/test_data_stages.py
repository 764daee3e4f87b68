"""benchmarks/scale/data_stages.py: the synthetic corpus, the ratios and verdicts, and a smoke run of every stage."""

from __future__ import annotations

import json

import pytest

from benchmarks.scale import data_stages, synthetic


def test_the_synthetic_corpus_joins_distinct_bundled_pairs(tmp_path, monkeypatch):
    bundled = [(f"en {i} .", f"de {i} .") for i in range(7)]
    monkeypatch.setattr(synthetic, "bundled_pairs", lambda: bundled)
    folder = synthetic.write_folder(tmp_path / "f", 40)
    en = (folder / "news.train.en").read_text(encoding="utf-8").splitlines()
    de = (folder / "news.train.de").read_text(encoding="utf-8").splitlines()
    assert len(en) == len(de) == 40 == len(set(en))
    # Each line is two bundled pairs joined, the same two on both sides.
    assert all(e.replace("en", "de") == d for e, d in zip(en, de))
    assert not list(folder.glob(".*.tmp"))
    with pytest.raises(ValueError, match="at most 48 distinct"):
        synthetic.write_folder(tmp_path / "g", 49)


def _stage(seconds, rss, disk=1.0):
    return {"seconds": seconds, "peak_rss_mb": rss, "disk_written_mb": disk, "exit_code": 0}


def test_ratios_to_the_previous_size_and_the_targets():
    data = {"sizes": {
        "1200000": {stage: _stage(10, 1000) for stage in data_stages.STAGES},
        "4500000": {**{stage: _stage(40, 1400, 3.75) for stage in data_stages.STAGES},
                    "prepare": _stage(50, 1600), "cache_one_core": {"core_ratio": 1.8},
                    "input": {**_stage(20, 900), "stage": {"target_tokens_per_second": 350_000}}}}}
    summary = data_stages.summarise(data)
    ratios = summary["ratios_to_previous_size"]["1200000->4500000"]
    assert ratios["size_ratio"] == 3.75 and ratios["vocabulary"] == {"time": 4.0, "peak_rss": 1.4, "disk": 3.75}
    met = summary["targets_met"]
    assert met["time_ratio_1.2M_to_4.5M_within_4.5x"]["vocabulary"] and not \
        met["time_ratio_1.2M_to_4.5M_within_4.5x"]["prepare"]
    assert not met["peak_rss_ratio_1.2M_to_4.5M_within_1.5x"]["prepare"]
    assert met["cache_core_ratio_at_least_1.7"] == {"4500000": True}
    assert met["input_at_least_400k_target_tokens_per_second"] == {"4500000": False}


@pytest.mark.slow
def test_smoke_run_measures_every_stage_at_two_sizes(tmp_path):
    output = tmp_path / "report.json"
    assert data_stages.main(["--smoke", "--work-dir", str(tmp_path / "work"), "--output", str(output)]) == 0
    report = json.loads(output.read_text(encoding="utf-8"))
    assert set(report["sizes"]) == {"400", "1600"}
    for size in report["sizes"].values():
        for stage in data_stages.STAGES:
            assert size[stage]["exit_code"] == 0 and size[stage]["seconds"] > 0 and size[stage]["peak_rss_mb"] > 0
    assert report["sizes"]["1600"]["prepare"]["disk_written_mb"] > 0
    assert report["sizes"]["1600"]["cache_one_core"]["core_ratio"] > 0
    assert report["sizes"]["1600"]["input"]["stage"]["target_tokens_per_second"] > 0
    assert report["sizes"]["1600"]["train"]["stage"]["final_step"] == 2
    assert "400->1600" in report["summary"]["ratios_to_previous_size"]
    assert "load average" in report["timings"] and len(report["machine_at_last_stage"]["load_average"]) == 3

    # Some stages measured again on the same work directory replace theirs in the same report.
    before = report["sizes"]["1600"]["input"]
    assert data_stages.main(["--smoke", "--sizes", "1600", "--one-core-sizes", "", "--stages", "input", "--merge",
                             "--work-dir", str(tmp_path / "work"), "--output", str(output)]) == 0
    merged = json.loads(output.read_text(encoding="utf-8"))
    assert merged["sizes"]["400"] == report["sizes"]["400"]
    assert merged["later_runs"][0]["arguments"]["stages"] == ["input"]
    assert merged["sizes"]["1600"]["input"] != before
    assert merged["sizes"]["1600"]["train"] == report["sizes"]["1600"]["train"]
    with pytest.raises(SystemExit):
        data_stages.main(["--stages", "tokenize"])
