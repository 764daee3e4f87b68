"""A CTranslate2 conversion decodes as the model does: same pieces greedily, same text handling around it."""

from __future__ import annotations

import json
import random

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_transformer as kt
from keras_transformer.decoding.ctranslate2_export import (
    UnsupportedModelError,
    convert_to_ctranslate2,
    is_ctranslate2_export,
)
from keras_transformer.decoding.ctranslate2_translator import CTranslate2Translator, check_engine_options
from keras_transformer.decoding.export import export_record, is_exported_translator, load_exported
from keras_transformer.decoding.formats import METADATA_FILE
from keras_transformer.decoding.settings import DecodingSettings
from keras_transformer.decoding.translator import Translator

pytest.importorskip("ctranslate2")

PAIRS = [
    ("The package provides a library.", "Das Paket stellt eine Bibliothek bereit."),
    ("This tool converts images.", "Dieses Werkzeug wandelt Bilder um."),
    ("Documentation is at https://example.org/doc/ online.",
     "Die Dokumentation ist unter https://example.org/doc/ online."),
    ("Fonts for the desktop.", "Schriften für den Desktop."),
    ("A small and fast server.", "Ein kleiner und schneller Server."),
    ("Shows the current weather.", "Zeigt das aktuelle Wetter."),
    ("Plugins for the editor.", "Erweiterungen für den Editor."),
    ("Data files for the game.", "Datendateien für das Spiel."),
]


def _overfit(model, tokenizer, pairs, steps: int):
    """``model`` fitted to ``pairs`` until it reproduces them (a trained model's confident predictions)."""
    eos, bos, pad = model.config.eos_id, model.config.bos_id, model.config.pad_id
    sources = [ids + [eos] for ids in tokenizer.tokenize(tf.constant([s for s, _ in pairs])).to_list()]
    targets = [ids for ids in tokenizer.tokenize(tf.constant([t for _, t in pairs])).to_list()]
    width, length = max(map(len, sources)), max(map(len, targets)) + 1
    src = np.full((len(pairs), width), pad, np.int32)
    tgt_in = np.full((len(pairs), length), pad, np.int32)
    tgt_out = np.full((len(pairs), length), pad, np.int32)
    for i, (s, t) in enumerate(zip(sources, targets)):
        src[i, : len(s)] = s
        tgt_in[i, : len(t) + 1] = [bos] + t
        tgt_out[i, : len(t) + 1] = t + [eos]
    model.compile(optimizer=keras.optimizers.Adam(3e-3), label_smoothing=0.0)
    # One epoch of `steps` batches, each all the pairs: the same updates as `steps` epochs, without an epoch's
    # overhead each.
    model.fit(tf.data.Dataset.from_tensors(((src, tgt_in), tgt_out)).repeat(steps), epochs=1, shuffle=False, verbose=0)
    return model


@pytest.fixture(scope="module", params=["post-norm tied", "pre-norm untied"])
def trained(request, verbatim_tokenizer):
    pre = request.param.startswith("pre")
    random.seed(0)  # Keras draws each initializer's seed from Python's generator
    np.random.seed(0)
    model = kt.Transformer(vocab_size=verbatim_tokenizer.vocab_size, num_layers=2, d_model=64, num_heads=4, d_ff=128,
                           dropout=0.0, norm_first=pre, tie_output_embeddings=not pre)
    model.build()
    return _overfit(model, verbatim_tokenizer, PAIRS, 150)


DECODING = DecodingSettings(beam_size=3, length_penalty=0.6, max_length_offset=10, split_sentences=True)


@pytest.fixture(scope="module")
def converted(trained, verbatim_tokenizer, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ct2")
    return {q: convert_to_ctranslate2(trained, verbatim_tokenizer, folder / q, q, DECODING)
            for q in ("float32", "int8")}


SENTENCES = [s for s, _ in PAIRS] + ["Fonts for the server.", "A small library for the desktop."]


@pytest.mark.parametrize("quantization", ["float32", "int8"])
def test_greedy_decoding_gives_the_models_own_translations(trained, verbatim_tokenizer, converted, quantization):
    # int8 weights move the logits a little: the same pieces where the model is sure (its training
    # sentences), not always on sentences it never saw.
    sentences = SENTENCES if quantization == "float32" else SENTENCES[: len(PAIRS)]
    ours = Translator(trained, verbatim_tokenizer, decoding=DECODING).translate(sentences, greedy=True)
    engine = CTranslate2Translator(converted[quantization], threads=1).translate(sentences, greedy=True)
    assert ours == engine
    # The model was trained: its greedy outputs are the references (a broken conversion still "agrees"
    # with nothing else).
    assert ours[:4] == [t for _, t in PAIRS[:4]]


def test_the_engine_reads_and_writes_text_as_the_savedmodel(trained, verbatim_tokenizer, converted):
    engine = load_exported(converted["float32"])
    assert isinstance(engine, CTranslate2Translator)
    # A URL the model never saw goes through as a placeholder and comes back from the source.
    [copied] = engine.translate(["Documentation is at https://lists.debian.org/new/ online."], greedy=True)
    assert "https://lists.debian.org/new/" in copied
    # A two-sentence paragraph is translated as its two sentences, joined.
    first, second = PAIRS[0][0], PAIRS[5][0]
    [paragraph] = engine.translate([f"{first} {second}"])
    assert paragraph == " ".join(engine.translate([first, second]))
    # A few minutes' training on eight pairs leaves beams close (TensorFlow's CPU kernels do not add in one
    # order), so the references are checked where the model is sure: greedily.
    ours = Translator(trained, verbatim_tokenizer, decoding=DECODING)
    [greedy] = engine.translate([f"{first} {second}"], greedy=True)
    assert greedy == ours.translate([f"{first} {second}"], greedy=True)[0]
    assert greedy.startswith(PAIRS[0][1] + " ")


def test_the_export_records_how_it_decodes_and_refuses_other_settings(converted):
    path = converted["int8"]
    assert is_exported_translator(path) and is_ctranslate2_export(path)
    record = export_record(path)
    assert record["beam_size"] == 3 and record["engine"] == "ctranslate2"
    assert record["engine.quantization"] == "int8" and record["engine.length_penalty"] == pytest.approx(0.48)
    engine = load_exported(path, threads=1)
    assert engine.decoding == DECODING
    with pytest.raises(ValueError, match="cannot decode with .*beam_size"):
        engine.translate(["Fonts."], beam_size=5)
    n_best = engine.translate(["Fonts for the desktop."], n_best=True)
    assert len(n_best[0]) == 3 and n_best[0][0] == engine.translate(["Fonts for the desktop."])[0]
    with pytest.raises(ValueError, match="engine.no_repeat_ngram_size"):
        check_engine_options({"no_repeat_ngram_size": -1})
    with pytest.raises(ValueError, match="engine.patience"):
        check_engine_options({"patience": 2})


def test_a_parser_or_a_constraint_is_refused_with_the_reason(tokenizer, tmp_path):
    parser = kt.SpanParser(50, labels=["", "NP", "VP"], tags=["DT", "NN"], word_start_ids=list(range(2, 50, 2)),
                           num_layers=1, d_model=16, num_heads=2, d_ff=32, span_hidden=16)
    parser.build()
    with pytest.raises(UnsupportedModelError, match="span_parser model cannot be converted to CTranslate2"):
        parser.export_decoder(tmp_path / "p", tokenizer, format="ctranslate2")
    aligned = kt.Transformer(vocab_size=tokenizer.vocab_size, num_layers=1, d_model=32, num_heads=2, d_ff=64,
                             word_alignment=True, word_start_ids=(5, 6), slot_ids=(7,))
    with pytest.raises(UnsupportedModelError, match="word_alignment .* no place for"):
        aligned.export_decoder(tmp_path / "a", tokenizer, format="ctranslate2")
    from keras_transformer.decoding.repetition import RepetitionGuard

    model = kt.Transformer(vocab_size=tokenizer.vocab_size, num_layers=1, d_model=32, num_heads=2, d_ff=64)
    with pytest.raises(UnsupportedModelError, match="RepetitionGuard.*takes no constraint"):
        model.export_decoder(tmp_path / "c", tokenizer, constraint=RepetitionGuard(tokenizer.vocab_size),
                             format="ctranslate2")
    with pytest.raises(ValueError, match="export format 'onnx'"):
        model.export_decoder(tmp_path / "o", tokenizer, format="onnx")
    assert not (tmp_path / "c").exists()


def test_the_metadata_holds_the_tokenizers_and_the_model(converted, verbatim_tokenizer):
    path = converted["float32"]
    metadata = json.loads((path / METADATA_FILE).read_text("utf-8"))
    assert metadata["kind"] == "ctranslate2" and metadata["copies_verbatim"] is True
    assert (path / "assets.extra" / "source.model").read_bytes() == verbatim_tokenizer.serialized_model
    assert metadata["max_positions"] >= 2048 + DECODING.max_length_offset


def test_a_sentence_s_translation_does_not_depend_on_what_else_is_asked(converted):
    engine = CTranslate2Translator(converted["float32"], threads=1)
    together = engine.translate(SENTENCES, batch_size=4)
    assert [engine.translate([s])[0] for s in SENTENCES] == together


def test_the_translate_command_takes_a_ctranslate2_directory(converted, capsys):
    from pipelines.tasks.translation import translate_cli

    sentences = [PAIRS[0][0], PAIRS[5][0]]
    assert translate_cli.main(["--model", str(converted["int8"]), *sentences]) == 0
    assert capsys.readouterr().out.splitlines() == CTranslate2Translator(converted["int8"]).translate(sentences)
    with pytest.raises(SystemExit):
        translate_cli.main(["--model", str(converted["int8"]), "--beam-size", "7", sentences[0]])
    assert "cannot decode with {'beam_size': 7}" in capsys.readouterr().err


def test_the_guard_s_rule_picks_the_best_hypothesis_without_a_third_copy():
    from keras_transformer.decoding.ctranslate2_translator import without_loops

    assert without_loops(["Code-Code-Code", "der der der", "Code-Code für", "x"]) == "Code-Code für"
    assert without_loops(["a b a b a b", "ja ja ja"]) is None


def _guard_sources():
    return SENTENCES + [" ".join(s for s, _ in PAIRS[:3])]


def _export(model, tokenizer, folder, guard: int):
    return convert_to_ctranslate2(model, tokenizer, folder, "float32", DecodingSettings(
        beam_size=4, max_length_offset=30, repetition_guard=guard, split_sentences=False))


@pytest.fixture(scope="module")
def untrained(verbatim_tokenizer, tmp_path_factory):
    """An export of an untrained model that loops on words, with and without the guard.

    Which token a random model repeats depends on the session's vocabulary: one repeats ")," (no
    letters, so no loop by the rule), another a word. The first seed whose model loops on words
    is kept, so the guard always has work to do.
    """
    from keras_transformer.decoding.loops import repeated_ngram

    folder = tmp_path_factory.mktemp("ct2-untrained")
    for seed in range(3, 23):
        model = kt.Transformer(vocab_size=verbatim_tokenizer.vocab_size, num_layers=1, d_model=32, num_heads=2,
                               d_ff=64, dropout=0.0)
        model.build()
        # Seeded here: keras.utils.set_random_seed would reset TensorFlow's kernels, the session's tokenizer's too.
        rng = np.random.default_rng(seed)
        model.set_weights([rng.normal(0.0, 0.3, w.shape).astype("float32") for w in model.get_weights()])
        unguarded = _export(model, verbatim_tokenizer, folder / f"{seed}-0", 0)
        translations = CTranslate2Translator(unguarded, threads=1).translate(_guard_sources())
        if any(repeated_ngram(text) for text in translations):  # the guarded export only of the model kept
            return {0: unguarded, 8: _export(model, verbatim_tokenizer, folder / f"{seed}-8", 8)}
    pytest.fail("no seed gave an untrained model that loops on words")


def test_the_guard_leaves_no_looping_translation(untrained):
    from keras_transformer.decoding.loops import repeated_ngram

    sources = _guard_sources()
    unguarded = CTranslate2Translator(untrained[0], threads=1).translate(sources)
    guarded = CTranslate2Translator(untrained[8], threads=1).translate(sources)
    looping = [i for i, text in enumerate(unguarded) if repeated_ngram(text)]
    assert looping, unguarded  # the untrained model does loop: the guard has work to do
    assert [text for text in guarded if repeated_ngram(text)] == []
    # Where the engine's best did not loop, the guard changes nothing.
    assert all(guarded[i] == unguarded[i] for i in range(len(sources)) if i not in looping)
    assert all(guarded[i] for i in looping)  # and a looping sentence still gets a translation
