"""The span parser (keras_transformer/models/span_parser.py): shapes, padding, save/load, learning."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.models.span_parser.model import SpanParser, span_parser_loss
from keras_transformer.models.span_parser.targets import IGNORE

VOCAB = 50
# Even ids begin a word, odd ids continue one; 0 is padding.
WORD_STARTS = list(range(2, VOCAB, 2))
LABELS, TAGS = ["", "NP", "VP", "S+VP"], ["DT", "NN", "VB"]


def _model(**overrides):
    settings = dict(num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout=0.0, span_hidden=16)
    model = SpanParser(VOCAB, labels=LABELS, tags=TAGS, word_start_ids=WORD_STARTS, **{**settings, **overrides})
    model.build()
    return model


def test_outputs_are_per_span_and_per_word():
    model = _model()
    # Sentence 0: three words (2 | 4 5 | 6), sentence 1: two words and padding.
    source = np.array([[2, 4, 5, 6], [8, 10, 0, 0]], np.int32)
    outputs = model(source)
    assert outputs["spans"].shape == (2, 4, 4, 4) and outputs["tags"].shape == (2, 3, 3)
    assert outputs["spans"].dtype == "float32"


SUPAR_SPANS = dict(word_lstm=1)


@pytest.mark.parametrize("options", [{}, SUPAR_SPANS], ids=["encoder", "word_lstm"])
def test_padding_leaves_a_sentence_unchanged(options):
    model = _model(**options)
    alone = model(np.array([[8, 10, 11]], np.int32))
    padded = model(np.array([[8, 10, 11, 0, 0], [2, 4, 6, 12, 14]], np.int32))
    # Sentence 0's two words: its spans (0..2) and tags are the same beside a longer neighbour.
    np.testing.assert_allclose(padded["spans"][0, :3, :3], alone["spans"][0], atol=1e-5)
    np.testing.assert_allclose(padded["tags"][0, :2], alone["tags"][0], atol=1e-5)


@pytest.mark.parametrize("options", [{}, SUPAR_SPANS], ids=["encoder", "word_lstm"])
def test_the_spans_depend_on_the_words(options):
    model = _model(**options)
    before = np.asarray(model(np.array([[2, 4, 6]], np.int32))["spans"])
    after = np.asarray(model(np.array([[2, 4, 8]], np.int32))["spans"])
    assert np.abs(after - before).max() > 1e-4


def test_config_and_keras_file_round_trip(tmp_path):
    model = _model(norm_first=False)
    source = np.array([[2, 3, 4, 6]], np.int32)
    path = tmp_path / "span.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_config() == model.get_config()
    np.testing.assert_allclose(loaded(source)["spans"], model(source)["spans"], atol=1e-6)


def test_a_model_saved_with_the_removed_settings_at_what_it_now_does_loads():
    """A span parser saved before ``span_loss``, ``chart_scores`` and ``span_biaffine`` were removed
    records them; at the tree CRF, its marginals and no biaffine scorer, it is the model built now."""
    model = _model()
    saved = {**model.get_config(), "span_loss": "tree_crf", "chart_scores": "marginals", "span_biaffine": 0}
    assert SpanParser.from_config(saved).config == model.config
    for setting, value in (("span_loss", "local"), ("chart_scores", "log_odds"), ("span_biaffine", 8)):
        with pytest.raises(ValueError, match=f"`{setting}`={value!r}: was removed"):
            SpanParser.from_config({**saved, setting: value})


def test_word_lstm_round_trips(tmp_path):
    """``word_lstm`` adds BiLSTM layers over the words."""
    model = _model(**SUPAR_SPANS)
    assert "word_lstm_0" in {layer.name for layer in model.layers}
    source = np.array([[2, 3, 4, 6, 8]], np.int32)
    path = tmp_path / "supar.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_config() == model.get_config() and loaded.config.word_lstm == 1
    np.testing.assert_allclose(loaded(source)["spans"], model(source)["spans"], atol=1e-5)
    with pytest.raises(ValueError, match="word_lstm"):
        _model(word_lstm=-1)


def test_it_learns_a_chart_and_the_loss_ignores_padding():
    model = _model()
    source = np.array([[2, 4, 6], [8, 10, 0]], np.int32)
    spans = np.full([2, 4, 4], IGNORE, np.int32)
    spans[0][np.triu_indices(4, 1)] = 0
    spans[1][np.triu_indices(3, 1)] = 0
    spans[0, 0, 2], spans[1, 0, 2] = 1, 2
    tags = np.array([[0, 1, 2], [2, 0, IGNORE]], np.int32)
    optimizer = keras.optimizers.Adam(1e-2)
    first = float(span_parser_loss(model(source), spans, tags))

    # No autograph (the step has no tensor-dependent Python control flow): its conversion cache
    # once handed this step another function's conversion after the export tests in one process.
    @tf.function(autograph=False)
    def step():
        with tf.GradientTape() as tape:
            loss = span_parser_loss(model(source, training=True), spans, tags)
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss

    for _ in range(60):
        loss = step()
    assert float(loss) < 0.1 * first
    predicted = np.asarray(model(source)["spans"]).argmax(-1)
    assert predicted[0, 0, 2] == 1 and predicted[1, 0, 2] == 2


@pytest.mark.parametrize("setting, value, message", [
    ("d_model", 15, "must be even"), ("word_start_ids", [], "word_start_ids"), ("labels", ["NP"], "empty label"),
    ("tags", [], "POS `tags`"), ("chart_scores", "log_odds", "`chart_scores`='log_odds': was removed")])
def test_bad_settings_name_themselves(setting, value, message):
    with pytest.raises(ValueError, match=message):
        SpanParser(**{"source_vocab_size": VOCAB, "labels": LABELS, "tags": TAGS, "word_start_ids": WORD_STARTS,
                      setting: value})


def test_the_preset_builds_a_ready_span_parser():
    pieces = ["<pad>", "<unk>", "<s>", "</s>"] + [f"\u2581w{i}" if i in WORD_STARTS else f"x{i}"
                                                  for i in range(4, VOCAB)]
    with pytest.raises(ValueError, match=r"pass source_pieces=tokenizer.pieces\(\)"):
        SpanParser.from_preset("span-parser-cpu", source_vocab_size=VOCAB, labels=LABELS, tags=TAGS,
                               word_start_ids=WORD_STARTS)
    model = SpanParser.from_preset("span-parser-cpu", source_vocab_size=VOCAB, labels=LABELS, tags=TAGS,
                                   word_start_ids=WORD_STARTS, source_pieces=pieces, num_layers=1)
    assert model.built and model.config.dropout == 0.3 and model.num_layers == 1 and model.characters is not None
    assert model.count_params() > 0 and model(np.array([[2, 4, 5]], np.int32))["spans"].shape == (1, 3, 3, 4)
    with pytest.raises(ValueError, match="builds a transformer, not a span parser"):
        SpanParser.from_preset("parser-cpu", source_vocab_size=VOCAB)


def test_a_word_can_be_the_mean_of_its_pieces():
    first, mean = _model(), _model(word_pieces="mean")
    mean.set_weights(first.get_weights())
    # Words: 2 | 4 5 | 6, then EOS (3) and padding: neither is part of a word.
    source = np.array([[2, 4, 5, 6, 3, 0]], np.int32)
    encoded = first.encode(source)
    words, lengths = mean.word_states(source, encoded)
    assert int(lengths[0]) == 3
    np.testing.assert_allclose(words[0, 1], (encoded[0, 1] + encoded[0, 2]) / 2, atol=1e-6)
    np.testing.assert_allclose(words[0, 2], encoded[0, 3], atol=1e-6)
    np.testing.assert_allclose(first.word_states(source, encoded)[0][0, 1], encoded[0, 1], atol=1e-6)
    with pytest.raises(ValueError, match="word_pieces"):
        _model(word_pieces="last")


def test_fit_trains_a_span_parser_in_a_notebook():
    """``compile()`` + ``fit`` with the gold charts and tags: the plain Keras path."""
    model = _model()
    source = np.array([[2, 4, 6, 3], [8, 10, 3, 0]], np.int32)
    spans = np.full([2, 4, 4], IGNORE, np.int32)
    spans[0][np.triu_indices(4, 1)], spans[1][np.triu_indices(3, 1)] = 0, 0
    spans[0, 0, 3], spans[0, 1, 3], spans[1, 0, 2] = 3, 2, 1
    tags = np.array([[0, 1, 2], [0, 1, IGNORE]], np.int32)
    model.compile(optimizer=keras.optimizers.Adam(0.01))
    history = model.fit(source, {"spans": spans, "tags": tags}, epochs=40, batch_size=2, verbose=0)
    assert history.history["loss"][-1] < 0.1 * history.history["loss"][0]
    assert np.asarray(model(source)["spans"])[0, 0, 3].argmax() == 3
    model.compile()  # the recipe's Adam by default
    assert model.optimizer.beta_2 == 0.98


def test_piece_dropout_hides_pieces_in_training_only_and_keeps_the_words():
    model = _model(piece_dropout=0.5)
    source = np.array([[2, 4, 5, 6, 8, 10, 3, 0]], np.int32)
    plain = model(source)
    np.testing.assert_allclose(model(source, training=False)["spans"], plain["spans"])
    trained = [model(source, training=True) for _ in range(4)]
    # Same words (five of them), other encodings: the dropped pieces became unknown.
    assert all(out["tags"].shape == plain["tags"].shape for out in trained)
    assert any(not np.allclose(out["spans"], plain["spans"], atol=1e-4) for out in trained)
    with pytest.raises(ValueError, match="piece_dropout"):
        _model(piece_dropout=1.0)


def test_a_span_parser_can_spell_its_words():
    pieces = ["<pad>", "<unk>", "<s>", "</s>"] + [("\u2581" if i % 2 == 0 else "") + "abcdefghij"[i % 10] * (1 + i % 3)
                                                  for i in range(4, VOCAB)]
    model = _model(char_dim=4, source_pieces=pieces)
    plain = _model()
    source = np.array([[2, 4, 5, 6, 3, 0]], np.int32)
    assert model.characters is not None and plain.characters is None
    assert model.count_params() > plain.count_params()
    alone = model(np.array([[8, 10, 11]], np.int32))
    padded = model(np.array([[8, 10, 11, 0, 0, 0], [2, 4, 5, 7, 12, 3]], np.int32))
    np.testing.assert_allclose(padded["spans"][0, :3, :3], alone["spans"][0], atol=1e-5)
    # The spelling reaches the scores: silencing the character CNN's output changes them.
    spelled = np.asarray(model(source)["tags"])
    projection = model.characters.projection
    projection.set_weights([np.zeros_like(w) for w in projection.get_weights()])
    assert spelled.shape == (1, 3, 3) and not np.allclose(model(source)["tags"], spelled, atol=1e-4)
    with pytest.raises(ValueError, match="source_pieces"):
        _model(char_dim=4)
    with pytest.raises(ValueError, match="char_dim"):
        _model(char_dim=-1, source_pieces=pieces)


@pytest.mark.parametrize("spell_dropped", [False, True])
def test_a_spelling_span_parser_round_trips_through_a_keras_file(tmp_path, spell_dropped):
    pieces = ["<pad>", "<unk>", "<s>", "</s>"] + [f"\u2581w{i}" if i % 2 == 0 else f"x{i}" for i in range(4, VOCAB)]
    model = _model(char_dim=4, source_pieces=pieces, word_pieces="mean", spell_dropped=spell_dropped)
    source = np.array([[2, 3, 4, 6, 7, 3]], np.int32)
    model.save(tmp_path / "spelling.keras")
    loaded = keras.saving.load_model(tmp_path / "spelling.keras")
    assert loaded.get_config() == model.get_config() and list(loaded.config.source_pieces) == pieces
    np.testing.assert_allclose(loaded(source)["spans"], model(source)["spans"], atol=1e-6)
    np.testing.assert_allclose(loaded(source)["tags"], model(source)["tags"], atol=1e-6)


@pytest.mark.parametrize("spell_dropped", [False, True])
def test_piece_dropout_hides_the_spelling_unless_spell_dropped(spell_dropped):
    pieces = ["<pad>", "<unk>", "<s>", "</s>"] + [f"\u2581w{i}" if i % 2 == 0 else f"x{i}" for i in range(4, VOCAB)]
    model = _model(char_dim=4, source_pieces=pieces, piece_dropout=0.9, spell_dropped=spell_dropped)
    source = np.array([list(range(4, 24))], np.int32)
    read, spelling = [], model.spelling

    def recording(source_ids, read_ids=None, index=None):
        read.append(np.asarray(read_ids))
        return spelling(source_ids, read_ids, index)

    model.spelling = recording
    model(source, training=True)
    # 20 pieces at 0.9: some are hidden (read as <unk>); the spelling reads all of them only when spell_dropped.
    assert np.array_equal(read[0], source) == spell_dropped
    assert spell_dropped or (read[0] == 1).any()
    with pytest.raises(ValueError, match="spell_dropped.*char_dim"):
        _model(spell_dropped=True)


def test_two_parsers_in_one_process_name_their_weights_alike():
    """Checkpoints are read by weight path below the model's name: a second ``word_lstm`` parser in
    the same process (the averaging stage after training) must not get ``forward_lstm_1``."""
    paths = [[v.path.split("/", 1)[1] for v in _model(**SUPAR_SPANS).weights] for _ in range(2)]
    assert paths[0] == paths[1] and "word_lstm_0/forward_lstm/lstm_cell/kernel" in paths[0]
