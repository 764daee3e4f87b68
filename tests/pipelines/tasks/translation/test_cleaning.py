"""Cleaning filters with counts per reason, and the clear errors for malformed input files."""

import pytest

from pipelines.config import ConfigError, from_dict
from pipelines.tasks.translation.cleaning import (
    REASONS,
    CleaningConfig,
    DataError,
    clean_pairs,
    count_lines,
    normalize_text,
    read_lines,
    read_parallel,
)


def test_normalize_text_nfkc_and_whitespace():
    assert normalize_text("  \ufb01le\u00a0name\t\tx ") == "file name x"
    assert normalize_text("a\u2028b\u3000c\u2009d") == "a b c d"  # line separator, CJK space
    assert normalize_text("\uff21\uff22\uff23") == "ABC"  # full-width letters
    assert normalize_text("\u2026") == "..."
    assert normalize_text("Kriegsführung") == "Kriegsführung"  # composed umlauts survive
    assert normalize_text("Kriegsfu\u0308hrung") == "Kriegsführung"  # decomposed are composed


def test_clean_pairs_counts_each_reason():
    config = CleaningConfig(max_words=5, max_length_ratio=2.0)
    pairs = [
        ("Hello world", "Hallo Welt"),            # kept
        ("  ", "leer"),                           # empty (after normalization)
        ("a b c d e f", "a b c d e f"),           # too_long (6 words > 5)
        ("one", "eins zwei drei"),                # length_ratio 3 > 2
        ("Hello  world", "Hallo Welt"),           # duplicate once normalized
        ("Good day", "Guten Tag"),                # kept
    ]
    kept, counts = clean_pairs(pairs, config)
    assert kept == [("Hello world", "Hallo Welt"), ("Good day", "Guten Tag")]
    assert counts == {"input": 6, "empty": 1, "too_long": 1, "length_ratio": 1, "duplicate": 1,
                      "kept": 2}
    assert set(REASONS) <= set(counts)


def test_clean_pairs_without_filters_keeps_test_sets_whole():
    config = CleaningConfig(max_words=2)
    pairs = [("a b c", "x y z"), ("a b c", "x y z"), ("", "x")]
    kept, counts = clean_pairs(pairs, config, apply_filters=False)
    assert kept == pairs[:2]
    assert counts["empty"] == 1 and counts["too_long"] == 0 and counts["duplicate"] == 0


def test_cleaning_config_from_dict_and_validation():
    config = from_dict(CleaningConfig, {"max_words": 50, "filter_splits": ["train", "test"]})
    assert config.max_words == 50 and config.filter_splits == ("train", "test")
    with pytest.raises(ConfigError, match="max_length_ratio"):
        from_dict(CleaningConfig, {"max_length_ratio": 0.5})
    with pytest.raises(ConfigError, match="unknown setting"):
        from_dict(CleaningConfig, {"max_word": 50})


def test_read_lines_splits_on_newline_only(tmp_path):
    path = tmp_path / "x.en"
    path.write_bytes("a\u2028b\r\nc\x85d\nlast".encode())
    assert list(read_lines(path)) == ["a\u2028b", "c\x85d", "last"]
    assert count_lines(path) == 3


def test_undecodable_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.de"
    path.write_bytes(b"erste Zeile\nzweite Zeile\n" + b"dritte \xff Zeile\nvierte\n")
    with pytest.raises(DataError, match=rf"{path}:3: not valid UTF-8"):
        list(read_lines(path))


def test_mismatched_line_counts_name_both_files(tmp_path):
    source, target = tmp_path / "c.train.en", tmp_path / "c.train.de"
    source.write_text("one\ntwo\nthree\n", encoding="utf-8")
    target.write_text("eins\nzwei\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        list(read_parallel(source, target))
    message = str(err.value)
    assert str(source) in message and "3 lines" in message
    assert str(target) in message and "2 lines" in message


def test_missing_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        list(read_lines(tmp_path / "absent.en"))
