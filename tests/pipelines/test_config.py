"""Typed configuration: a value of the wrong type names the setting before any work is done."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from pipelines.config import ConfigError, from_dict, load_config, merge


@dataclass
class Inner:
    size: int = 1
    rate: float = 0.5
    names: list[str] | None = None


@dataclass
class Outer:
    inner: Inner = field(default_factory=Inner)
    path: str | list[str] = ""
    flag: bool = False
    minutes: float | None = None


@pytest.mark.parametrize("data, message", [
    ({"inner": {"size": "abc"}}, r"<t>:inner: Inner.size='abc': expected int, got str"),
    ({"inner": {"size": True}}, r"Inner.size=True: expected int, got bool"),
    ({"inner": {"rate": "fast"}}, r"Inner.rate='fast': expected float, got str"),
    ({"inner": {"names": "a"}}, r"Inner.names='a': expected list\[str\] \| None"),
    ({"path": 3}, r"Outer.path=3: expected str \| list\[str\], got int"),
    ({"flag": "yes"}, r"Outer.flag='yes': expected bool"),
    ({"minutes": "ten"}, r"Outer.minutes='ten': expected float \| None"),
])
def test_wrong_types_name_the_setting(data, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(Outer, data, source="<t>")


def test_right_types_pass():
    config = from_dict(Outer, {"inner": {"size": 3, "rate": 1, "names": ["a"]}, "path": ["x", "y"],
                               "flag": True, "minutes": None})
    assert config.inner.rate == 1 and config.path == ["x", "y"]


def test_the_real_tokenizer_setting_from_yaml(tmp_path):
    from pipelines.tokenization import TokenizerConfig

    path = tmp_path / "t.yaml"
    path.write_text("tokenizer:\n  vocab_size: abc\n")
    with pytest.raises(ConfigError, match=r"t.yaml:2: tokenizer: TokenizerConfig.vocab_size='abc': expected int"):
        load_config(TokenizerConfig, path, section="tokenizer")


def test_overrides_merge_into_the_file_before_defaults_are_derived(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("inner: {size: 2, rate: 0.1}\npath: a\n")
    config = load_config(Outer, path, overrides={"inner": {"rate": 0.2}})
    assert (config.inner.size, config.inner.rate, config.path) == (2, 0.2, "a")
    assert merge({"a": {"b": 1, "c": 2}}, {"a": {"c": 3}, "d": 4}) == {"a": {"b": 1, "c": 3}, "d": 4}


def test_a_rejected_value_points_at_its_own_line_or_its_set(tmp_path):
    """A config's own checks (``SettingError``) name the line of the setting, not of its section."""
    from pipelines.tokenization import TokenizerConfig
    from pipelines.training.config import TrainConfig

    path = tmp_path / "t.yaml"
    path.write_text("tokenizer:\n  verbatim: true\n  vocab_size: 100\n"
                    "train:\n  preset: demo\n\n  warmup_steps: -3\n")
    with pytest.raises(ConfigError, match=r"t.yaml:3: tokenizer: TokenizerConfig."
                                          r"vocab_size=100: must be at least 261"):
        load_config(TokenizerConfig, path, section="tokenizer")
    with pytest.raises(ConfigError, match=r"t.yaml:7: train: TrainConfig.warmup_steps=-3: "):
        load_config(TrainConfig, path, section="train")
    with pytest.raises(ConfigError, match=r"^--set train.warmup_steps: TrainConfig.warmup_steps=0: "):
        load_config(TrainConfig, path, section="train", overrides={"warmup_steps": 0}, overrides_source="--set")
    # The target side's settings are checked on a copy; the error still points into tokenizer.target.
    path.write_text("tokenizer:\n  shared: false\n  target:\n    model_type: bpe\n    vocab_size: 100\n")
    with pytest.raises(ConfigError, match=r"t.yaml:5: tokenizer: TokenizerConfig.target.vocab_size=100: must be"):
        load_config(TokenizerConfig, path, section="tokenizer")


def _one_line_error(cls, path, **kwargs) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(cls, path, **kwargs)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_removed_setting_fails_in_one_line_saying_it_was_removed(tmp_path):
    """A config still naming a setting taken out of the product is told so, with its file and line,
    not "unknown setting" (``removed_settings`` of the stage's dataclass)."""
    from pipelines.input_pipeline import InputConfig
    from pipelines.tokenization import TokenizerConfig
    from pipelines.training.config import TrainConfig

    path = tmp_path / "x.yaml"
    path.write_text("tokenizer:\n  vocab_size: 8000\n  verbatim_identifiers: true\n"
                    "input:\n  max_length: 64\n  subword_dropout: 0.1\n"
                    "train:\n  preset: demo\n\n  unlikelihood: 0.5\n")
    assert _one_line_error(TrainConfig, path, section="train") == (
        f"{path}:10: train.unlikelihood was removed (it lost in every measurement; see "
        'benchmarks/results/README.md, "Tried and dropped")')
    assert _one_line_error(InputConfig, path, section="input").startswith(
        f"{path}:6: input.subword_dropout was removed (it lost in every measurement")
    assert _one_line_error(TokenizerConfig, path, section="tokenizer").startswith(
        f"{path}:3: tokenizer.verbatim_identifiers was removed (")
    path.write_text("train:\n  preset: demo\n")
    assert _one_line_error(TrainConfig, path, section="train", overrides={"unlikelihood_window": 2},
                           overrides_source="--set").startswith("--set train.unlikelihood_window was removed (")


def test_a_removed_value_fails_in_one_line_saying_it_was_removed(tmp_path):
    """``removed_values``: the setting stays, one of its values went."""
    from pipelines.input_pipeline import InputConfig

    path = tmp_path / "x.yaml"
    path.write_text("input:\n  max_length: 64\n  sentence_pairs: only_aligned\n")
    assert _one_line_error(InputConfig, path, section="input").startswith(
        f"{path}:3: input.sentence_pairs='only_aligned' was removed (it lost in every measurement")
    kept = load_config(InputConfig, path, section="input", overrides={"sentence_pairs": "only"})
    assert kept.sentence_pairs == "only"


@pytest.mark.parametrize("preset, setting, value, line", [
    ("parser-cpu", "tagger", "auxiliary", "t.yaml:5: train: TrainConfig.model.tagger='auxiliary': was removed ("),
    ("span-parser-cpu", "span_biaffine", 256, "t.yaml:5: train: TrainConfig.model.span_biaffine=256: was removed ("),
    ("span-parser-cpu", "span_loss", "local", "t.yaml:5: train: TrainConfig.model.span_loss='local': was removed ("),
    ("span-parser-cpu", "chart_scores", "log_odds", "t.yaml:5: train: TrainConfig.model.chart_scores='log_odds': "
                                                    "was removed ("),
])
def test_a_removed_model_setting_fails_in_one_line_saying_it_was_removed(tmp_path, preset, setting, value, line):
    """Model settings are checked by the preset's config class (``removed_settings``/``removed_values``
    of ``keras_transformer.models.config``); the error points at the override's own line."""
    from pipelines.training.config import TrainConfig

    path = tmp_path / "t.yaml"
    path.write_text(f"train:\n  preset: {preset}\n  model:\n    dropout: 0.1\n    {setting}: {value}\n")
    message = _one_line_error(TrainConfig, path, section="train")
    assert message.startswith(f"{path.parent}/{line}"), message


def test_a_key_given_twice_fails_naming_the_file_the_line_and_the_key(tmp_path):
    """YAML's loaders keep the last of two equal keys: a second section would replace the first."""
    path = tmp_path / "x.yaml"
    path.write_text("inner:\n  size: 2\npath: a\ninner:\n  rate: 0.1\n")
    assert _one_line_error(Outer, path) == (f"{path}:4: inner: given twice (first at line 1); "
                                            "the second would silently win")
    path.write_text("inner:\n  size: 2\n  rate: 0.1\n  size: 3\n")
    assert _one_line_error(Outer, path).startswith(f"{path}:4: inner.size: given twice (first at line 2)")
    # A YAML merge ("<<") is not a key given twice: the mapping's own key overrides the merged one.
    path.write_text("base: &b {size: 2, rate: 0.1}\ninner:\n  <<: *b\n  size: 3\n")
    merged = load_config(Inner, path, section="inner")
    assert (merged.size, merged.rate) == (3, 0.1)


def test_an_empty_config_fails_in_one_line(tmp_path):
    path = tmp_path / "x.yaml"
    for text in ("", "# only a comment\n\n"):
        path.write_text(text)
        assert _one_line_error(Outer, path) == f"{path}: empty: no settings"


@pytest.mark.parametrize("cls, setting, value", [
    ("pipelines.input_pipeline.InputConfig", "shuffle_buffer", -1),
    ("pipelines.input_pipeline.InputConfig", "shuffle_buffer", 0),
    ("pipelines.input_pipeline.InputConfig", "tokens_per_batch", 0),
    ("pipelines.input_pipeline.InputConfig", "min_bucket_length", 1),
    ("pipelines.tokenization.TokenizerConfig", "input_sentence_size", 0),
    ("pipelines.tokenization.TokenizerConfig", "num_threads", 0),
    ("pipelines.tokenization.TokenizerConfig", "seed", -1),
    ("pipelines.averaging.AveragingConfig", "last_n", 0),
    ("flows.tracking.TrackingConfig", "log_every_steps", 0),
    ("flows.retention.RetentionConfig", "keep_runs", 0),
])
def test_a_number_out_of_its_range_points_at_its_own_line(tmp_path, cls, setting, value):
    """Each would fail only later, far from the setting (a division by zero, TensorFlow's shuffle,
    an empty cache, SentencePiece's unsigned seed)."""
    import importlib

    module, name = cls.rsplit(".", 1)
    config_class = getattr(importlib.import_module(module), name)
    path = tmp_path / "x.yaml"
    path.write_text(f"section:\n  # a comment\n  {setting}: {value}\n")
    message = _one_line_error(config_class, path, section="section")
    assert message.startswith(f"{path}:3: section: {name}.{setting}={value}: "), message
