"""Presets: parameter counts against Table 3, and clear errors for impossible settings."""

import pytest

from keras_transformer import Transformer, TransformerConfig, get_preset, preset_names

TABLE_3 = [name for name in preset_names() if get_preset(name).paper_params_millions]


def test_every_preset_the_issue_names_exists():
    expected = {
        "base", "big", "A-h1", "A-h4", "A-h16", "A-h32", "B-dk16", "B-dk32", "C-N2", "C-N4",
        "C-N8", "C-d256", "C-d1024", "C-dff1024", "C-dff4096", "D-drop0.0", "D-drop0.2",
        "D-ls0.0", "D-ls0.2", "E-learned-pos", "parser", "demo", "cpu-small",
    }
    assert expected <= set(preset_names())


@pytest.mark.parametrize("name", TABLE_3)
def test_parameter_count_matches_table_3(name):
    """At the paper's ~37k shared vocabulary every row is within 8% of Table 3's column."""
    model = Transformer.from_preset(name, vocab_size=37000)
    paper = get_preset(name).paper_params_millions * 1e6
    assert abs(model.count_params() - paper) / paper < 0.08, (name, model.count_params(), paper)


def test_base_and_big_counts_are_close_to_the_paper():
    counts = {}
    for name in ("base", "big"):
        model = Transformer.from_preset(name, vocab_size=37000)
        model.build()
        counts[name] = model.count_params()
    # Shared source/target/pre-softmax embeddings: 37000 * 512 counted once.
    assert 62e6 < counts["base"] < 66e6
    assert 210e6 < counts["big"] < 216e6


def test_shared_embedding_is_one_matrix_and_separate_vocabularies_are_two():
    # Output projections tied to the embeddings, so that only the embeddings differ in size.
    shared = Transformer.from_preset("demo", vocab_size=1000, tie_output_embeddings=True)
    shared.build()
    assert shared.source_embedding is shared.target_embedding
    separate = Transformer.from_preset("demo", source_vocab_size=1000, target_vocab_size=300,
                                       share_embeddings=False, tie_output_embeddings=True)
    separate.build()
    assert separate.source_embedding.embeddings.shape == (1000, 128)
    assert separate.target_embedding.embeddings.shape == (300, 128)
    assert separate.count_params() - shared.count_params() == 300 * 128


def test_presets_carry_training_and_decoding_settings():
    base, big = get_preset("base"), get_preset("big")
    assert base.training.label_smoothing == 0.1 and base.training.warmup_steps == 4000
    assert (base.training.adam_beta_1, base.training.adam_beta_2, base.training.adam_epsilon) == (0.9, 0.98, 1e-9)
    assert base.decoding.beam_size == 4 and base.decoding.length_penalty == 0.6
    assert base.decoding.max_length_offset == 50
    # The paper's test sets are sentences; the DDTP presets translate paragraphs sentence by sentence.
    assert not base.decoding.split_sentences and not get_preset("parser").decoding.split_sentences
    assert get_preset("cpu-small").decoding.split_sentences and get_preset("demo").decoding.split_sentences
    assert get_preset("cpu-small").decoding.beam_size == 4  # merged with base's, not replaced
    assert base.training.checkpoints_to_average == 5 and big.training.checkpoints_to_average == 20
    assert big.model["dropout"] == 0.3 and big.model["num_heads"] == 16
    assert get_preset("D-ls0.2").training.label_smoothing == 0.2
    parser = get_preset("parser").model
    assert parser["num_layers"] == 4 and parser["d_model"] == 1024


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(ValueError, match="Unknown preset 'bsae'.*base"):
        Transformer.from_preset("bsae", vocab_size=100)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"vocab_size": 100, "d_model": 510, "num_heads": 8},
         r"num_heads.*d_model=510 is not divisible by num_heads=8"),
        ({"vocab_size": 100, "num_layers": -1}, r"`num_layers`=-1"),
        ({"vocab_size": -5}, r"`source_vocab_size`=-5"),
        ({"vocab_size": 100, "d_ff": 0}, r"`d_ff`=0"),
        ({"vocab_size": 100, "dropout": 1.5}, r"`dropout`=1.5"),
        ({"vocab_size": 100, "positional_encoding": "rotary"}, r"`positional_encoding`='rotary'"),
        ({"source_vocab_size": 100, "target_vocab_size": 50}, r"share_embeddings.*100.*50"),
        ({}, r"vocab_size"),
    ],
)
def test_impossible_configurations_name_the_setting_and_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**kwargs)
    with pytest.raises(ValueError, match=message):
        Transformer(**kwargs)


def test_unknown_override_is_rejected():
    with pytest.raises(ValueError, match="Unknown model setting.*num_layer"):
        Transformer.from_preset("base", vocab_size=100, num_layer=3)


def test_a_removed_model_setting_is_named_as_removed():
    with pytest.raises(ValueError, match=r"preset 'span-parser-cpu': model setting `span_biaffine`=8 was removed "
                                         r"\(it lost in every measurement"):
        get_preset("span-parser-cpu").model_config(source_vocab_size=100, span_biaffine=8)
    with pytest.raises(ValueError, match=r"model setting `tagger`='auxiliary' was removed"):
        Transformer.from_preset("parser-cpu", vocab_size=100, tagger="auxiliary")
