"""The ``translate`` command: arguments or stdin in, one translation per line out."""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import keras_transformer as kt
from keras_transformer.decoding.export import export_translator
from keras_transformer.decoding.formats import METADATA_FILE
from keras_transformer.decoding.settings import DecodingSettings
from keras_transformer.decoding.translator import Translator
from pipelines.decode_cli import writes_trees
from pipelines.tasks.translation import translate_cli

SENTENCES = ["Shows the current weather.", "", "Documentation for the library."]
OFFSET = "4"


def one_line(translations: list[str]) -> list[str]:
    """What the command prints: an untrained model can emit a newline piece, and one line per
    input sentence is the command's contract, so it prints newlines as spaces."""
    return [t.replace("\n", " ") for t in translations]


@pytest.fixture(scope="module")
def saved_model(tokenizer, tmp_path_factory):
    model = kt.Transformer(vocab_size=tokenizer.vocab_size, num_layers=1, d_model=32, num_heads=2,
                           d_ff=64, dropout=0.0)
    model.build()
    path = tmp_path_factory.mktemp("cli") / "model.keras"
    model.save(path)
    return model, path


@pytest.fixture(scope="module")
def exported(saved_model, tokenizer, tmp_path_factory):
    model, _ = saved_model
    return export_translator(model, tokenizer, tmp_path_factory.mktemp("cli") / "export",
                             DecodingSettings(beam_size=2, length_penalty=0.6, max_length_offset=int(OFFSET)))


@pytest.fixture(scope="module")
def tree_tokenizer_model(tmp_path_factory) -> Path:
    """A seq2seq parser's target vocabulary: the words of linearised trees (``(S``, ``)S``, tags)."""
    import sentencepiece as spm

    folder = tmp_path_factory.mktemp("trees")
    lines = folder / "trees.txt"
    lines.write_text("\n".join(["(S (NP DT NN )NP (VP VBZ )VP . )S", "(NP NNP NNP )NP", "(VP VBD (PP IN NN )PP )VP"]
                               * 20) + "\n", "utf-8")
    spm.SentencePieceTrainer.train(input=str(lines), model_prefix=str(folder / "trees"), model_type="word",
                                   vocab_size=16, pad_id=0, unk_id=1, bos_id=2, eos_id=3, minloglevel=2)
    return folder / "trees.model"


def test_translates_arguments(saved_model, tokenizer, tokenizer_model, capsys):
    model, path = saved_model
    code = translate_cli.main(["--model", str(path), "--tokenizer", str(tokenizer_model),
                               "--beam-size", "2", "--max-length-offset", OFFSET, *SENTENCES])
    assert code == 0
    lines = capsys.readouterr().out.split("\n")
    assert lines[-1] == "" and len(lines) == len(SENTENCES) + 1
    expected = Translator(model, tokenizer).translate(SENTENCES, beam_size=2, max_length_offset=int(OFFSET))
    assert lines[:-1] == one_line(expected)


def test_reads_stdin(saved_model, tokenizer, tokenizer_model, capsys, monkeypatch):
    model, path = saved_model
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(s + "\n" for s in SENTENCES)))
    code = translate_cli.main(["--model", str(path), "--tokenizer", str(tokenizer_model), "--greedy",
                               "--max-length-offset", OFFSET])
    assert code == 0
    expected = Translator(model, tokenizer).translate(SENTENCES, greedy=True, max_length_offset=int(OFFSET))
    assert capsys.readouterr().out.split("\n")[:-1] == one_line(expected)


#: The environment a user runs a command in: no log level chosen.
USER_ENV = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}


def test_console_script_with_exported_model_and_stdin(saved_model, tokenizer, exported):
    """The installed ``translate`` script, in its own process, on an exported SavedModel: the
    translations on stdout and nothing on stderr (no TensorFlow start-up lines, no SentencePiece
    notice for the vocabulary's identity normalisation)."""
    model, _ = saved_model
    script = Path(sys.executable).with_name("translate")
    result = subprocess.run([str(script), "--model", str(exported)], input="\n".join(SENTENCES) + "\n",
                            capture_output=True, text=True, env=USER_ENV, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr == ""
    expected = Translator(model, tokenizer).translate(SENTENCES, beam_size=2, length_penalty=0.6,
                                                      max_length_offset=int(OFFSET))
    assert result.stdout.split("\n")[:-1] == one_line(expected)


def test_a_corrupt_export_is_the_one_line_on_stderr_of_the_process(exported, tmp_path):
    """In a real process, the error's line is all of stderr: TensorFlow's start-up lines (absl,
    cudart, cuInit) are held back while it is imported."""
    corrupt = Path(shutil.copytree(exported, tmp_path / "corrupt"))
    (corrupt / "saved_model.pb").write_bytes(b"\x0a\xff\xff\xff\xff\x0f not a protobuf")
    result = subprocess.run([str(Path(sys.executable).with_name("translate")), "--model", str(corrupt), "Hello."],
                            capture_output=True, text=True, env=USER_ENV, timeout=600)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"translate: error: {corrupt}: cannot load the exported model: ")
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), result.stderr


def test_usage_errors(saved_model, tmp_path, capsys):
    _, path = saved_model
    with pytest.raises(SystemExit) as error:
        translate_cli.main(["--model", str(path), "x"])  # a .keras model needs --tokenizer
    assert error.value.code == 2
    with pytest.raises(SystemExit):
        translate_cli.main(["--model", str(path), "--tokenizer", "t", "--beam-size", "0", "x"])
    capsys.readouterr()
    assert translate_cli.main(["--model", str(tmp_path / "missing.keras"), "--tokenizer", "t", "x"]) == 2
    assert capsys.readouterr().err == f"translate: error: model {tmp_path / 'missing.keras'} does not exist\n"


# --- bad input: exit status 2 and one line on stderr ------------------------------------------------


def refused(capsys, argv: list[str], stdin: bytes | None = None, monkeypatch=None) -> str:
    """The one line ``translate`` writes to stderr when it refuses ``argv`` (status 2, no output)."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    assert translate_cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert captured.err.count("\n") == 1, captured.err
    return captured.err


def test_invalid_utf8_on_stdin_is_named_by_line_and_byte(saved_model, tokenizer_model, capsys, monkeypatch):
    _, path = saved_model
    argv = ["--model", str(path), "--tokenizer", str(tokenizer_model)]
    assert refused(capsys, argv, b"Hello.\n\nThe caf\xc3\xa9 \xff opens.\n", monkeypatch) == \
        "translate: error: stdin:3: invalid UTF-8 at byte 10\n"
    # An argument with bytes that are not UTF-8 (Python keeps them as lone surrogates).
    assert refused(capsys, [*argv, "fine", "b\u00e4d \udcff"]) == \
        "translate: error: argument 2: invalid UTF-8 at byte 5\n"


def test_a_corrupt_export_is_refused(exported, tmp_path, capsys, caplog):
    corrupt = Path(shutil.copytree(exported, tmp_path / "corrupt"))
    (corrupt / "saved_model.pb").write_bytes(b"\x0a\xff\xff\xff\xff\x0f not a protobuf")
    line = refused(capsys, ["--model", str(corrupt), "Hello."])
    assert line.startswith(f"translate: error: {corrupt}: cannot load the exported model: ")
    # --debug: the same line, after the traceback of its cause.
    with caplog.at_level(logging.ERROR, logger="translate"):
        assert translate_cli.main(["--model", str(corrupt), "--debug", "Hello."]) == 2
    assert capsys.readouterr().err.endswith(line)
    assert "Traceback" in caplog.text and "DecodeError" in caplog.text


def test_a_file_that_is_not_a_keras_archive_is_refused(tokenizer_model, tmp_path, capsys):
    fake = tmp_path / "x.keras"
    fake.write_text("not a model\n")
    assert refused(capsys, ["--model", str(fake), "--tokenizer", str(tokenizer_model), "Hello."]) == \
        f"translate: error: {fake} is not a Keras model archive (not a zip file)\n"


def test_a_tokenizer_that_is_not_a_sentencepiece_model_is_refused(saved_model, tmp_path, capsys):
    _, path = saved_model
    fake = tmp_path / "spm.model"
    fake.write_text("not a model\n")
    line = refused(capsys, ["--model", str(path), "--tokenizer", str(fake), "Hello."])
    assert line.startswith(f"translate: error: {fake}: not a SentencePiece model: ")


@pytest.mark.parametrize("metadata", [{"kind": "chart_parser"}, {"constraint": "BracketConstraint"}])
def test_a_parser_export_is_refused(exported, metadata, tmp_path, capsys):
    """Told by the export's metadata before its graph loads: a chart parser's ``kind``, a seq2seq
    parser's tree constraint."""
    parser = Path(shutil.copytree(exported, tmp_path / "parser"))
    recorded = json.loads((parser / METADATA_FILE).read_text())
    (parser / METADATA_FILE).write_text(json.dumps({**recorded, **metadata}))
    assert refused(capsys, ["--model", str(parser), "Hello."]) == \
        f"translate: error: {parser} is a parser, not a translation model: parse it with `parse`\n"


def test_a_seq2seq_parser_keras_model_is_refused(tokenizer, tokenizer_model, tree_tokenizer_model, tmp_path,
                                                 capsys):
    from keras_transformer.tokenizer import SubwordTokenizer

    target = SubwordTokenizer(tree_tokenizer_model)
    model = kt.Transformer(source_vocab_size=tokenizer.vocab_size, target_vocab_size=target.vocab_size,
                           share_embeddings=False, num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout=0.0)
    model.build()
    model.save(tmp_path / "parser.keras")
    assert refused(capsys, ["--model", str(tmp_path / "parser.keras"), "--tokenizer", str(tokenizer_model),
                            "--target-tokenizer", str(tree_tokenizer_model), "Hello."]) == \
        f"translate: error: {tmp_path / 'parser.keras'} is a parser, not a translation model: parse it with `parse`\n"


def test_a_tree_vocabulary_is_told_from_a_text_vocabulary(tokenizer, tree_tokenizer_model):
    from keras_transformer.tokenizer import SubwordTokenizer

    assert writes_trees(SubwordTokenizer(tree_tokenizer_model).pieces())
    assert not writes_trees(tokenizer.pieces())
    # A text vocabulary with one bracketed pair by chance, or lower-case pairs, is still text.
    assert not writes_trees(["\u2581(S", ")S", "(s", ")s", "\u2581(", ")"])
    assert writes_trees(["\u2581(S", "\u2581)S", "\u2581(NP", "\u2581)NP", "\u2581NN"])


@pytest.fixture(scope="module")
def learned_positions(tokenizer, tmp_path_factory):
    """A model with learned positions (Table 3 row E) that encodes at most 16 pieces."""
    model = kt.Transformer(vocab_size=tokenizer.vocab_size, num_layers=1, d_model=32, num_heads=2, d_ff=64,
                           dropout=0.0, positional_encoding="learned", max_length=16)
    model.build()
    path = tmp_path_factory.mktemp("cli") / "learned.keras"
    model.save(path)
    return model, path


LONG = ("Shows the current weather and the forecast for the next days in a small window. " * 130)[:10_000]


def test_a_line_longer_than_the_model_encodes_is_refused_with_its_length(learned_positions, tokenizer,
                                                                           tokenizer_model, capsys):
    _, path = learned_positions
    pieces = len(tokenizer.tokenize([LONG]).to_list()[0]) + 1
    assert pieces > 16
    assert refused(capsys, ["--model", str(path), "--tokenizer", str(tokenizer_model), "Hello.", LONG]) == \
        f"translate: error: line 2: 10000 characters ({pieces} pieces with EOS); the model encodes at most 16: " \
        "split it\n"


def test_an_export_measures_long_lines_in_words(learned_positions, tokenizer, tmp_path, capsys, caplog):
    """An export has no tokenizer outside its graph: more words than the limit are refused, more
    characters are warned about, and the line is translated."""
    model, _ = learned_positions
    export = export_translator(model, tokenizer, tmp_path / "export",
                               DecodingSettings(beam_size=1, max_length_offset=int(OFFSET)))
    assert refused(capsys, ["--model", str(export), LONG]) == \
        f"translate: error: line 1: 10000 characters ({len(LONG.split())} words); the model encodes at most 16 " \
        "pieces with EOS: split it\n"
    with caplog.at_level(logging.WARNING, logger="pipelines.decode_cli"):
        assert translate_cli.main(["--model", str(export), "Hello.", "Documentation for the library."]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert [r.getMessage() for r in caplog.records if r.name == "pipelines.decode_cli"] == [
        "line 2: 30 characters, maybe more pieces than the 16 (with EOS) the model encodes: the rest would be cut off"]


def test_an_error_that_is_not_the_inputs_is_one_line_with_status_1(capsys, caplog):
    from pipelines.cli_errors import run_command

    def defect() -> int:
        raise RuntimeError("an index out of range\nand more")

    assert run_command("translate", defect) == 1
    assert capsys.readouterr().err == ("translate: error: unexpected RuntimeError: an index out of range "
                                       "(--debug shows the traceback)\n")
    with caplog.at_level(logging.ERROR, logger="translate"):
        assert run_command("translate", defect, debug=True) == 1
    assert capsys.readouterr().err == "translate: error: unexpected RuntimeError: an index out of range\n"
    assert "Traceback" in caplog.text
