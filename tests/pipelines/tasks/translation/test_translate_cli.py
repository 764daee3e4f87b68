"""The ``translate`` command: arguments or stdin in, one translation per line out."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

import keras_transformer as kt
from keras_transformer.decoding.export import export_translator
from keras_transformer.decoding.settings import DecodingSettings
from keras_transformer.decoding.translator import Translator
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


def test_console_script_with_exported_model_and_stdin(saved_model, tokenizer, tmp_path):
    """The installed ``translate`` script, in its own process, on an exported SavedModel."""
    model, _ = saved_model
    exported = export_translator(model, tokenizer, tmp_path / "export",
                                 DecodingSettings(beam_size=2, length_penalty=0.6, max_length_offset=int(OFFSET)))
    script = Path(sys.executable).with_name("translate")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([str(script), "--model", str(exported)], input="\n".join(SENTENCES) + "\n",
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    expected = Translator(model, tokenizer).translate(SENTENCES, beam_size=2, length_penalty=0.6,
                                                      max_length_offset=int(OFFSET))
    assert result.stdout.split("\n")[:-1] == one_line(expected)


def test_usage_errors(saved_model, tmp_path):
    _, path = saved_model
    with pytest.raises(SystemExit) as error:
        translate_cli.main(["--model", str(path), "x"])  # a .keras model needs --tokenizer
    assert error.value.code == 2
    with pytest.raises(SystemExit):
        translate_cli.main(["--model", str(tmp_path / "missing.keras"), "--tokenizer", "t", "x"])
    with pytest.raises(SystemExit):
        translate_cli.main(["--model", str(path), "--tokenizer", "t", "--beam-size", "0", "x"])
