"""The side-by-side serving benchmark on a tiny model: every engine in its own process, the same paragraphs."""

import pytest

from benchmarks.speed import serving_engines

pytest.importorskip("ctranslate2")


@pytest.mark.slow
def test_the_engines_translate_the_same_paragraphs_and_the_float32_conversion_decodes_greedily_as_keras(
        ddtp_corpus, tokenizer_model, tmp_path):
    import json

    import keras_transformer as kt
    from keras_transformer.tokenizer import SubwordTokenizer

    tokenizer = SubwordTokenizer(tokenizer_model)
    model = kt.Transformer.from_preset("cpu-small", vocab_size=tokenizer.vocab_size, d_model=32, num_heads=2, d_ff=64)
    model.save(tmp_path / "model.keras")
    output = tmp_path / "report.json"
    assert serving_engines.main([
        "--model", str(tmp_path / "model.keras"), "--tokenizer", str(tokenizer_model),
        "--corpus", str(ddtp_corpus.directory), "--max-paragraphs", "3", "--threads", "1",
        "--engines", "savedmodel", "ctranslate2-int8", "ctranslate2-int8-bulk", "ctranslate2-raw",
        "--engine-options", '{"no_repeat_ngram_size": 4}',
        "--output", str(output)]) == 0

    report = json.loads(output.read_text())
    assert [(r["engine"], r["threads"]) for r in report["rows"]] == [
        ("savedmodel", 1), ("ctranslate2-int8", 1), ("ctranslate2-int8-bulk", 1), ("ctranslate2-raw", 1)]
    for row in report["rows"]:
        assert set(row["splits"]) == {"test", "test_unseen"}
        assert row["splits"]["test"]["paragraphs"] == 3 and row["peak_rss_mb"] > 100
    assert "ctranslate2-int8/1t/test" in report["ratios_to_savedmodel"]
    # Bulk translation is the served model's translation, asked at once; the engine alone is its yardstick.
    assert report["bulk_same_as_served"] is True
    assert set(report["bulk_to_raw_engine"]) == {"1t/test", "1t/test_unseen"}
    assert all(r["speed"] > 0 and r["cpu"] > 0 for r in report["bulk_to_raw_engine"].values())
    raw = report["rows"][-1]["splits"]["test"]
    assert raw["paragraphs"] == 3 and 0 <= raw["bleu"] <= 100
    # Untrained weights decide by hair's breadths, yet a faithful float32 conversion follows them.
    parity = report["greedy_parity"]["test"]
    assert parity["sentences"] >= 3 and parity["fraction"] >= 0.6, parity
