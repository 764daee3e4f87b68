"""The full model: no information from the future, padding inert, save/load, encode/decode."""

import keras
import numpy as np
import pytest

from keras_transformer import Transformer
from keras_transformer.models.presets import get_preset
from keras_transformer.training.schedules import TransformerSchedule

VOCAB = 200


@pytest.fixture(scope="module", params=[False, True], ids=["post-norm", "pre-norm"])
def model(request):
    return Transformer.from_preset(
        "demo", vocab_size=VOCAB, num_layers=2, d_model=32, num_heads=4, d_ff=64, dropout=0.1,
        norm_first=request.param,
    )


def _ids(shape, seed):
    ids = np.random.default_rng(seed).integers(4, VOCAB, size=shape).astype("int32")
    return ids


def test_logits_shape_and_dtype(model):
    logits = model((_ids((2, 7), 0), _ids((2, 5), 1)))
    assert logits.shape == (2, 5, VOCAB) and logits.dtype == "float32"


def test_changing_a_future_target_token_leaves_earlier_outputs_unchanged(model):
    source, target = _ids((2, 9), 2), _ids((2, 8), 3)
    before = np.asarray(model((source, target)))
    for t in range(7):
        changed = target.copy()
        changed[:, t + 1] = (changed[:, t + 1] + 17) % VOCAB
        after = np.asarray(model((source, changed)))
        np.testing.assert_allclose(after[:, : t + 1], before[:, : t + 1], atol=1e-5)
        # ...and the change is visible from position t + 1 on, so the check can fail.
        assert np.abs(after[:, t + 1] - before[:, t + 1]).max() > 1e-4


def test_padding_changes_nothing_in_the_real_positions(model):
    source, target = _ids((1, 6), 4), _ids((1, 5), 5)
    plain = np.asarray(model((source, target)))
    padded_source = np.concatenate([source, np.zeros((1, 4), "int32")], axis=1)
    padded_target = np.concatenate([target, np.zeros((1, 3), "int32")], axis=1)
    padded = np.asarray(model((padded_source, padded_target)))
    np.testing.assert_allclose(padded[:, :5], plain, atol=1e-5)
    # A real token where the padding was does change the outputs.
    other = padded_source.copy()
    other[0, 7] = 9
    assert np.abs(np.asarray(model((other, padded_target)))[:, :5] - plain).max() > 1e-4


def test_padding_in_a_batch_matches_each_sentence_alone(model):
    a_src, a_tgt = _ids((1, 8), 6), _ids((1, 6), 7)
    b_src, b_tgt = _ids((1, 3), 8), _ids((1, 2), 9)
    batch_src = np.zeros((2, 8), "int32")
    batch_tgt = np.zeros((2, 6), "int32")
    batch_src[0], batch_tgt[0] = a_src[0], a_tgt[0]
    batch_src[1, :3], batch_tgt[1, :2] = b_src[0], b_tgt[0]
    batched = np.asarray(model((batch_src, batch_tgt)))
    np.testing.assert_allclose(batched[1, :2], np.asarray(model((b_src, b_tgt)))[0], atol=1e-5)


def test_dropout_only_in_training(model):
    source, target = _ids((2, 6), 10), _ids((2, 6), 11)
    inference = [np.asarray(model((source, target), training=False)) for _ in range(2)]
    np.testing.assert_array_equal(inference[0], inference[1])
    training = np.asarray(model((source, target), training=True))
    assert np.abs(training - inference[0]).max() > 1e-4


def test_encode_and_decode_compose_to_call(model):
    source, target = _ids((2, 6), 12), _ids((2, 4), 13)
    encoded = model.encode(source)
    output = model.decode(target, encoded, model.padding_mask(source))
    assert output.cache is None and output.attention is None
    logits = output.logits
    np.testing.assert_allclose(np.asarray(logits), np.asarray(model((source, target))), atol=1e-6)
    _, enc_scores = model.encode(source, return_attention_scores=True)
    dec_scores = model.decode(target, encoded, model.padding_mask(source), return_attention_scores=True).attention
    assert len(enc_scores) == 2 and enc_scores[0].shape == (2, 4, 6, 6)
    assert dec_scores[1]["cross"].shape == (2, 4, 4, 6) and dec_scores[1]["self"].shape == (2, 4, 4, 4)


@pytest.mark.parametrize("tied", [True, False])
def test_logits_mask_gives_the_logits_of_the_chosen_positions_in_order(tied):
    model = Transformer(vocab_size=VOCAB, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                        tie_output_embeddings=tied)
    source, target = _ids((3, 6), 14), _ids((3, 5), 15)
    chosen = np.random.default_rng(16).random((3, 5)) < 0.6
    encoded = model.encode(source)
    full = np.asarray(model.decode(target, encoded, model.padding_mask(source)).logits)
    some = np.asarray(model.decode(target, encoded, model.padding_mask(source), logits_mask=chosen).logits)
    assert some.shape == (chosen.sum(), VOCAB) and some.dtype == np.float32
    np.testing.assert_allclose(some, full[chosen], atol=1e-6)


def test_cached_decoding_gives_the_full_decoder_logits(model):
    source, target = _ids((3, 7), 14), _ids((3, 9), 15)
    source[1, 4:] = 0
    full = np.asarray(model((source, target)))
    encoded = model.encode(source)
    cache = model.init_cache(encoded)
    steps = []
    for t in range(target.shape[1]):
        logits, cache, _ = model.decode(
            target[:, t : t + 1], encoded, model.padding_mask(source), cache=cache, cache_index=t
        )
        steps.append(np.asarray(logits)[:, 0])
        # The self-attention cache holds the positions decoded so far, no more (not a buffer
        # of the maximum length that every step would copy).
        assert cache["self"][0]["key"].shape[2] == t + 1
    np.testing.assert_allclose(np.stack(steps, 1), full, atol=1e-4)


def test_dict_inputs_and_bad_inputs(model):
    source, target = _ids((1, 4), 16), _ids((1, 3), 17)
    np.testing.assert_allclose(
        np.asarray(model({"source_ids": source, "target_ids": target})),
        np.asarray(model((source, target))),
    )
    with pytest.raises(ValueError, match="expects inputs"):
        model(source)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"positional_encoding": "learned", "max_length": 64},
        {"share_embeddings": False, "source_vocab_size": VOCAB, "target_vocab_size": 50, "vocab_size": None},
        {"tie_output_embeddings": False, "d_k": 4, "d_v": 12},
        {"norm_first": True},
    ],
    ids=["shared", "learned-positions", "separate-vocab", "untied-output", "pre-norm"],
)
def test_keras_save_and_load_round_trip(tmp_path, overrides):
    kwargs = dict(vocab_size=VOCAB, num_layers=1, d_model=32, num_heads=4, d_ff=64)
    kwargs.update(overrides)
    model = Transformer.from_preset("demo", **kwargs)
    model.compile()
    source, target = _ids((2, 5), 18), _ids((2, 4), 19) % 50
    expected = np.asarray(model((source, target)))
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, Transformer)
    assert loaded.config == model.config
    np.testing.assert_array_equal(np.asarray(loaded((source, target))), expected)
    assert loaded.optimizer is not None and loaded.loss is not None


def test_from_preset_is_built_and_its_recipe_survives_save_and_load(tmp_path):
    model = Transformer.from_preset("cpu-small", vocab_size=VOCAB, num_layers=1)
    assert model.built and model.count_params() > 0  # no build() call needed, as in keras-hub
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.models.load_model(path, compile=False)
    assert loaded.training_recipe == model.training_recipe
    assert loaded.training_recipe.learning_rate_scale != 1.0  # cpu-small's, not the paper's
    # ... and its decoding: the loaded model translates paragraphs sentence by sentence, as the preset.
    assert loaded.decoding == model.decoding == get_preset("cpu-small").decoding
    assert loaded.decoding.split_sentences and not Transformer(vocab_size=VOCAB).decoding.split_sentences
    loaded.compile()
    recipe = model.training_recipe
    expected = TransformerSchedule(model.config.d_model, recipe.warmup_steps, recipe.learning_rate_scale)(0)
    paper = TransformerSchedule(model.config.d_model, recipe.warmup_steps)(0)
    assert float(loaded.optimizer.learning_rate) == pytest.approx(float(expected))
    assert float(expected) != pytest.approx(float(paper))


def test_mixed_bfloat16_keeps_logits_in_float32():
    model = Transformer.from_preset("demo", vocab_size=VOCAB, num_layers=1, dtype="mixed_bfloat16")
    logits = model((_ids((1, 4), 20), _ids((1, 3), 21)))
    assert logits.dtype == "float32"
    assert model.source_embedding.embeddings.dtype == "float32"
    assert np.isfinite(np.asarray(logits)).all()


def test_the_constructor_takes_every_config_setting_with_the_config_defaults():
    import dataclasses

    from keras_transformer.models.config import TransformerConfig
    from keras_transformer.models.transformer import Transformer

    assert Transformer(vocab_size=100).config == TransformerConfig(vocab_size=100)
    changed = {"num_layers": 2, "d_model": 64, "num_heads": 4, "d_ff": 128, "dropout": 0.2, "norm_first": True,
               "tie_output_embeddings": False, "positional_encoding": "learned", "max_length": 64}
    config = Transformer(vocab_size=100, **changed).config
    assert {name: getattr(config, name) for name in changed} == changed
    assert {f.name for f in dataclasses.fields(TransformerConfig)} <= set(config.to_dict())
    with pytest.raises(ValueError, match="num_layer"):
        Transformer(vocab_size=100, num_layer=2)  # a misspelt setting is not swallowed
