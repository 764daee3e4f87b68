"""An evaluation's decoding overrides: every ``DecodingSettings`` field by its own name, checked, merged once."""

from __future__ import annotations

import dataclasses

import pytest

from keras_transformer.decoding.export import ExportedTranslator, exported_decoding
from keras_transformer.decoding.settings import DecodingSettings
from pipelines.config import ConfigError, from_dict
from pipelines.decoding import PARSE_DECODING, DecodingOverrides
from pipelines.tasks.parsing.evaluation import ParseEvalConfig
from pipelines.tasks.translation.evaluation import EvalConfig


def other_value(name: str):
    """A valid value of setting ``name`` that is not its default (the same rule for every field)."""
    default = getattr(DecodingSettings(), name)
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 1
    return default + 0.25


def invalid_value(name: str):
    """A value of the wrong type for setting ``name``."""
    return "many" if not isinstance(getattr(DecodingSettings(), name), bool) else 3


@pytest.mark.parametrize("config_class, names", [(EvalConfig, DecodingSettings.names()),
                                                  (ParseEvalConfig, PARSE_DECODING)])
def test_every_decoding_setting_is_an_override_by_its_own_name(config_class, names):
    assert {f.name for f in dataclasses.fields(DecodingOverrides)} == set(DecodingSettings.names())
    assert {f.name for f in dataclasses.fields(config_class().decoding)} == set(names)
    overrides = {name: other_value(name) for name in names}
    config = from_dict(config_class, {"decoding": overrides}, source="eval.yaml")
    assert config.decoding.to_dict() == overrides
    merged = DecodingSettings().merged(config.decoding.to_dict())
    assert merged.to_dict() == {**DecodingSettings().to_dict(), **overrides}
    # Unset, an override leaves the preset's value alone.
    preset = DecodingSettings(beam_size=21, length_penalty=0.3)
    assert preset.merged(from_dict(config_class, {}).decoding.to_dict()) == preset


@pytest.mark.parametrize("name", DecodingSettings.names())
def test_a_bad_value_is_refused_naming_its_setting(name):
    with pytest.raises(ConfigError, match=rf"decoding.*{name}"):
        from_dict(EvalConfig, {"decoding": {name: invalid_value(name)}}, source="eval.yaml")


@pytest.mark.parametrize("name, value", [("beam_size", 0), ("length_penalty", -0.1), ("max_length_offset", -5),
                                         ("min_length_ratio", 1.5), ("repetition_guard", -1)])
def test_a_value_out_of_range_is_refused_before_any_work(name, value):
    with pytest.raises(ConfigError, match=rf"{name}={value}"):
        from_dict(EvalConfig, {"decoding": {name: value}}, source="eval.yaml")
    with pytest.raises(ValueError, match=rf"decoding.{name}"):
        DecodingSettings(**{name: value})


def test_a_setting_named_the_old_way_says_where_it_went():
    with pytest.raises(ConfigError, match=r"eval.yaml:alpha was removed \(now decoding.length_penalty\)"):
        from_dict(EvalConfig, {"alpha": 1.2}, source="eval.yaml")
    with pytest.raises(ConfigError, match=r"beam_size was removed \(now decoding.beam_size\)"):
        from_dict(ParseEvalConfig, {"beam_size": 8}, source="eval.yaml")
    with pytest.raises(ConfigError, match="decoding.alpha: unknown setting"):
        from_dict(EvalConfig, {"decoding": {"alpha": 1.2}}, source="eval.yaml")


def test_a_removed_setting_is_refused_saying_so_and_a_saved_record_of_it_still_loads():
    dropped = r"coverage_penalty was removed \(it lost to the presets' decoding without it; see benchmarks/results/"
    with pytest.raises(ConfigError, match=rf"eval.yaml:decoding.{dropped}"):
        from_dict(EvalConfig, {"decoding": {"coverage_penalty": 0.2}}, source="eval.yaml")
    with pytest.raises(ConfigError, match=rf"eval.yaml:{dropped}"):
        from_dict(EvalConfig, {"coverage_penalty": 0.2}, source="eval.yaml")
    with pytest.raises(ValueError, match=r"decoding.coverage_penalty=0.2: was removed \(it lost to the presets'"):
        DecodingSettings().merged({"coverage_penalty": 0.2})
    # A model saved, or an export written, while it was a setting recorded it at 0: that is how it decodes.
    saved = {**DecodingSettings(length_penalty=1.2).to_dict(), "coverage_penalty": 0.0}
    assert DecodingSettings.from_dict(saved) == DecodingSettings(length_penalty=1.2)
    assert exported_decoding({"decoding": saved}) == DecodingSettings(length_penalty=1.2)


@pytest.mark.parametrize("name", ["split_sentences", "min_length_ratio", "repetition_guard"])
def test_a_parse_overrides_only_the_beam_search(name):
    """A tree repeats brackets, is one sentence and ends where its words do: the other settings stay off."""
    assert from_dict(ParseEvalConfig, {"decoding": {"beam_size": 8, "length_penalty": 0.5, "max_length_offset": 9}},
                     source="eval.yaml").decoding.to_dict() == {"beam_size": 8, "length_penalty": 0.5,
                                                                "max_length_offset": 9}
    with pytest.raises(ConfigError, match=rf"eval.yaml:decoding.{name}: unknown setting of ParseDecodingOverrides; "
                                          r"(did you mean|known: beam_size, length_penalty, max_length_offset)"):
        from_dict(ParseEvalConfig, {"decoding": {name: other_value(name)}}, source="eval.yaml")


def test_an_export_decodes_only_with_the_settings_compiled_into_it():
    export = object.__new__(ExportedTranslator)
    export.path, export.decoding = "export", DecodingSettings(repetition_guard=8, length_penalty=1.2)
    assert export.decoding_record() == export.decoding.to_dict()
    assert export.decoding_record(repetition_guard=8) == export.decoding.to_dict()
    with pytest.raises(ValueError, match="cannot decode with {'repetition_guard': 0}"):
        export.decoding_record(repetition_guard=0)


def test_an_export_written_before_the_settings_were_one_record_reads_as_it_decodes():
    legacy = {"kind": "translator", "beam_size": 4, "alpha": 1.2, "max_length_offset": 50,
              "split_sentences": True, "min_length_ratio": 0.6, "coverage_penalty": 0.0}
    assert exported_decoding(legacy) == DecodingSettings(length_penalty=1.2, split_sentences=True,
                                                         min_length_ratio=0.6)
    assert exported_decoding({"decoding": DecodingSettings(beam_size=2).to_dict()}) == DecodingSettings(beam_size=2)
