"""``parse`` (pipelines/tasks/parsing/parse_cli.py): raw text becomes the treebank's tokens; bad input
is refused in one line.

The command on a trained model and its export is run by tests/flows/test_parsing_flow.py; here it
runs on untrained tiny models, whose trees are over the input words all the same.
"""

import io
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from keras_transformer.decoding.formats import METADATA_FILE
from pipelines.tasks.parsing import parse_cli
from pipelines.tasks.parsing.parse_cli import ptb_tokenize
from pipelines.tasks.parsing.tree import parse_tree


@pytest.mark.parametrize(("text", "tokens"), [
    # Clitics are split off the way the treebank writes them.
    ("It isn't cheap, he said.", ["It", "is", "n't", "cheap", ",", "he", "said", "."]),
    ("They'll pay; we've paid and I'd pay, but you're late.",
     ["They", "'ll", "pay", ";", "we", "'ve", "paid", "and", "I", "'d", "pay", ",", "but", "you", "'re", "late", "."]),
    ("Mr. Thomas's nomination can't wait.", ["Mr.", "Thomas", "'s", "nomination", "ca", "n't", "wait", "."]),
    ("the analysts' estimates", ["the", "analysts", "'", "estimates"]),
    # Double quotes become the opening and closing quote tokens.
    ('He called it "well qualified."', ["He", "called", "it", "``", "well", "qualified", ".", "''"]),
    ('"No," she said.', ["``", "No", ",", "''", "she", "said", "."]),
    # Brackets take their treebank names.
    ("INTER-TEL Inc. (Chandler, Ariz.) rose.",
     ["INTER-TEL", "Inc.", "-LRB-", "Chandler", ",", "Ariz.", "-RRB-", "rose", "."]),
    ("judgment {and} respect [sic]", ["judgment", "-LCB-", "and", "-RCB-", "respect", "-LSB-", "sic", "-RSB-"]),
    # Only the sentence's final period is split off: abbreviations inside keep theirs.
    ("Ms. Haag plays Elianti.", ["Ms.", "Haag", "plays", "Elianti", "."]),
    ("Prices in Washington, D.C., rose.", ["Prices", "in", "Washington", ",", "D.C.", ",", "rose", "."]),
    ("Shares rose?", ["Shares", "rose", "?"]),
    # Currency and percentages; numbers with commas and decimals stay whole.
    ("Sales rose 10% to $1,100.50 million.", ["Sales", "rose", "10", "%", "to", "$", "1,100.50", "million", "."]),
    ("", []),
])
def test_raw_text_becomes_treebank_tokens(text, tokens):
    assert ptb_tokenize(text) == tokens


# --- the command on tiny models: bad input is exit status 2 and one line on stderr ------------------


@pytest.fixture(scope="module")
def chart_parser(tokenizer, tmp_path_factory) -> Path:
    """A span parser's ``.keras`` model: untrained, but its trees are over the input words."""
    from keras_transformer.models.span_parser import SpanParser

    starts = [i for i, piece in enumerate(tokenizer.pieces()) if piece.startswith("\u2581")]
    model = SpanParser(tokenizer.vocab_size, ["", "NP", "S", "VP"], ["DT", "NN", "VB", "."], starts, num_layers=1,
                       d_model=16, num_heads=2, d_ff=32, span_hidden=16, dropout=0.0, pad_id=tokenizer.pad_id)
    model.build()
    path = tmp_path_factory.mktemp("parse") / "parser.keras"
    model.save(path)
    return path


@pytest.fixture(scope="module")
def translation_model(tokenizer, tmp_path_factory):
    """A translation model's ``.keras`` file and its export: not parsers."""
    from keras_transformer.decoding.export import export_translator
    from keras_transformer.decoding.settings import DecodingSettings
    from tests.keras_transformer.tiny_models import tiny_transformer

    model = tiny_transformer(tokenizer.vocab_size)
    folder = tmp_path_factory.mktemp("parse")
    model.save(folder / "translator.keras")
    export = export_translator(model, tokenizer, folder / "export", DecodingSettings(beam_size=1, max_length_offset=2))
    return folder / "translator.keras", export


def refused(capsys, argv: list[str], stdin: bytes | None = None, monkeypatch=None) -> str:
    """The one line ``parse`` writes to stderr when it refuses ``argv`` (status 2, no output)."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    assert parse_cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert captured.err.count("\n") == 1, captured.err
    return captured.err


def test_pretokenized_brackets_take_their_treebank_names(chart_parser, tokenizer_model, capsys):
    code = parse_cli.main(["--model", str(chart_parser), "--tokenizer", str(tokenizer_model), "--pretokenized",
                           "the ( package ) [ is ] { here } .", "f(x) rose"])
    assert code == 0
    trees = capsys.readouterr().out.splitlines()
    assert [parse_tree(tree).words() for tree in trees] == [
        ["the", "-LRB-", "package", "-RRB-", "-LSB-", "is", "-RSB-", "-LCB-", "here", "-RCB-", "."],
        ["f-LRB-x-RRB-", "rose"]]
    # The names the raw-text tokenizer gives them.
    assert ptb_tokenize("the (package) [is] {here} .") == parse_tree(trees[0]).words()


def test_invalid_utf8_on_stdin_is_named_by_line_and_byte(chart_parser, tokenizer_model, capsys, monkeypatch):
    argv = ["--model", str(chart_parser), "--tokenizer", str(tokenizer_model)]
    assert refused(capsys, argv, b"Ms. Haag plays Elianti.\n\xc3(\n", monkeypatch) == \
        "parse: error: stdin:2: invalid UTF-8 at byte 0\n"


def test_a_translation_model_is_refused(translation_model, tokenizer_model, capsys):
    keras_path, export = translation_model
    assert refused(capsys, ["--model", str(keras_path), "--tokenizer", str(tokenizer_model), "A sentence."]) == \
        f"parse: error: {keras_path} is a translation model, not a parser\n"
    assert refused(capsys, ["--model", str(export), "A sentence."]) == \
        f"parse: error: {export} is a translation model, not a parser\n"


def test_a_corrupt_export_is_refused(translation_model, tmp_path, capsys, caplog):
    _, export = translation_model
    corrupt = Path(shutil.copytree(export, tmp_path / "corrupt"))
    metadata = json.loads((corrupt / METADATA_FILE).read_text())
    (corrupt / METADATA_FILE).write_text(json.dumps({**metadata, "constraint": "BracketConstraint"}))
    (corrupt / "saved_model.pb").write_bytes(b"\x0a\xff\xff\xff\xff\x0f not a protobuf")
    line = refused(capsys, ["--model", str(corrupt), "A sentence."])
    assert line.startswith(f"parse: error: {corrupt}: cannot load the exported model: ")
    with caplog.at_level(logging.ERROR, logger="parse"):
        assert parse_cli.main(["--model", str(corrupt), "--debug", "A sentence."]) == 2
    assert capsys.readouterr().err.endswith(line)
    assert "Traceback" in caplog.text and "DecodeError" in caplog.text


def test_a_corrupt_export_is_the_one_line_on_stderr_of_the_process(translation_model, tmp_path):
    """In a real process, with no log level chosen, the error's line is all of stderr."""
    _, export = translation_model
    corrupt = Path(shutil.copytree(export, tmp_path / "corrupt"))
    metadata = json.loads((corrupt / METADATA_FILE).read_text())
    (corrupt / METADATA_FILE).write_text(json.dumps({**metadata, "constraint": "BracketConstraint"}))
    (corrupt / "saved_model.pb").write_bytes(b"\x0a\xff\xff\xff\xff\x0f not a protobuf")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([str(Path(sys.executable).with_name("parse")), "--model", str(corrupt), "A sentence."],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"parse: error: {corrupt}: cannot load the exported model: ")
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), result.stderr


def test_a_file_that_is_not_a_keras_archive_is_refused(tokenizer_model, tmp_path, capsys):
    fake = tmp_path / "x.keras"
    fake.write_text("(TOP (S (NN a)))\n")
    assert refused(capsys, ["--model", str(fake), "--tokenizer", str(tokenizer_model), "A sentence."]) == \
        f"parse: error: {fake} is not a Keras model archive (not a zip file)\n"
