"""Every hostile input the test suite covers, at every entry point, answered as a user sees it.

    python -m benchmarks.probes.hostile_inputs [--groups flows,parse-eval,translate,parse,served] \\
        [--timeout 600] [--output benchmarks/results/hostile-inputs-<date>.json]

The cases are those of tests/flows/test_cli.py (the flows' command line), tests/pipelines/tasks/parsing/
test_evalb_cli.py (``parse-eval``), tests/pipelines/tasks/translation/test_translate_cli.py
(``translate``), tests/pipelines/tasks/parsing/test_parse_cli.py (``parse``) and tests/flows/
test_serving.py with benchmarks/speed/serve_load.py's malformed requests (the served model). Each
command runs in a process of its own as a user runs it (the installed scripts, no log level chosen),
on tiny models built here (an untrained Transformer over a SentencePiece vocabulary of the bundled
corpus, trained as the pipeline trains its vocabularies): what is measured is the form of the answer,
not the model. The served cases go to ``mlflow models serve`` of the project's pyfunc on 127.0.0.1.

Reported per case: the command (temporary paths as ``<tmp>``) or the request, the exit status or
HTTP status, the seconds it took, stderr's (or the body's message's) first line and its line count,
and whether it was answered as it should be: a refusal is exit status 2 (HTTP 400) with one line and
no traceback; an answer is exit status 0 (HTTP 200) with nothing on stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import ROOT
from flows.tools.report import emit

logger = logging.getLogger("hostile_inputs")

GROUPS = ("flows", "parse-eval", "translate", "parse", "served")
#: The environment a user runs a command in: the checkout importable, no TensorFlow log level chosen.
USER_ENV = {**{k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "PREFECT_API_URL")},
            "PYTHONPATH": str(ROOT)}
SCRIPTS = Path(sys.executable).parent


def case(group: str, name: str, argv: list[str], expect: str = "refused", stdin: bytes | None = None) -> dict:
    return {"group": group, "case": name, "argv": argv, "expect": expect, "stdin": stdin}


def flows_cases(work: Path) -> list[dict]:
    """tests/flows/test_cli.py: settings, config files and data folders refused before start-up."""
    import yaml

    work.mkdir()
    settings = yaml.safe_load((ROOT / "configs" / "translation" / "demo.yaml").read_text("utf-8"))
    config = work / "demo.yaml"
    config.write_text(yaml.safe_dump({**settings, "run_dir": str(work / "run")}), "utf-8")
    flow = [sys.executable, "-m", "flows.translation", "--config", str(config)]
    cases = [case("flows", "misspelt --set key", [*flow, "--set", "train.warmup_stepz=10"])]
    misspelt = work / "misspelt.yaml"
    misspelt.write_text(config.read_text().replace("  validate_every_steps:", "  validate_evry_steps:"))
    cases.append(case("flows", "misspelt key in the file", [sys.executable, "-m", "flows.translation", "--config",
                                                             str(misspelt)]))
    missing = work / "no-such-corpus"
    cases.append(case("flows", "missing data folder", [*flow, "--set", "data.source=folder",
                                                        "--set", f"data.folder={missing}"]))
    folders = {
        "folder without parallel files": {},
        "mismatched line counts": {"news.train.en": b"One.\nTwo.\n", "news.train.de": b"Eins.\n"},
        "invalid UTF-8 in a data file": {"news.train.en": b"One.\nTwo.\n", "news.train.de": b"Eins.\n\xff zwei\n"},
        "empty data files": {"news.train.en": b"", "news.train.de": b""},
        "an empty test file": {"news.train.en": b"One.\n", "news.train.de": b"Eins.\n", "news.test.en": b"Two.\n",
                               "news.test.de": b""},
    }
    for number, (name, files) in enumerate(folders.items()):
        folder = work / f"corpus{number}"
        folder.mkdir()
        for file, data in files.items():
            (folder / file).write_bytes(data)
        cases.append(case("flows", name, [*flow, "--set", "data.source=folder", "--set", f"data.folder={folder}"]))
    for setting in ("tracking.log_every_steps=0", "input.shuffle_buffer=-1", "tokenizer.num_threads=0",
                    "retention.keep_runs=0", "evaluation.decoding.max_length_offset=-100"):
        cases.append(case("flows", f"--set {setting}", [*flow, "--set", setting]))
    cases.append(case("flows", "--train-steps 0", [*flow, "--train-steps", "0"]))
    twice = work / "twice.yaml"
    twice.write_text(config.read_text() + "train:\n  train_steps: 5\n")
    empty, comment = work / "empty.yaml", work / "comment.yaml"
    empty.write_text("")
    comment.write_text("# nothing but a comment\n\n")
    for name, path in (("a section given twice", twice), ("an empty config", empty),
                       ("a config of only a comment", comment)):
        cases.append(case("flows", name, [sys.executable, "-m", "flows.translation", "--config", str(path)]))
    return cases


def parse_eval_cases(work: Path) -> list[dict]:
    """tests/pipelines/tasks/parsing/test_evalb_cli.py: files parse-eval cannot score."""
    files = {"gold": b"(TOP (S (NN a)))\n(TOP (S (NN b)))\n", "unbalanced": b"(TOP (S (NN a)))\n(TOP (S (NN a))\n",
             "short": b"(TOP (S (NN a)))\n", "blank": b"(TOP (S (NN a)))\n\n", "empty": b"",
             "latin1": b"(TOP (S (NN a)))\n(TOP (S (NN caf\xe9)))\n", "binary": bytes(range(256)) * 4}
    work.mkdir()
    paths = {}
    for name, data in files.items():
        paths[name] = work / f"{name}.trees"
        paths[name].write_bytes(data)
    evalb = str(SCRIPTS / "parse-eval")
    return [
        case("parse-eval", "missing file", [evalb, str(work / "missing.trees"), str(paths["gold"])]),
        case("parse-eval", "unbalanced brackets", [evalb, str(paths["gold"]), str(paths["unbalanced"])]),
        case("parse-eval", "mismatched line counts", [evalb, str(paths["gold"]), str(paths["short"])]),
        case("parse-eval", "a blank line", [evalb, str(paths["blank"]), str(paths["blank"])]),
        case("parse-eval", "two empty files", [evalb, str(paths["empty"]), str(paths["empty"])]),
        case("parse-eval", "an empty test file", [evalb, str(paths["gold"]), str(paths["empty"])]),
        case("parse-eval", "invalid UTF-8", [evalb, str(paths["latin1"]), str(paths["latin1"])]),
        case("parse-eval", "a binary file", [evalb, str(paths["gold"]), str(paths["binary"])]),
    ]


def tiny_models(work: Path) -> dict[str, Path]:
    """A vocabulary of the bundled corpus, an untrained Transformer over it (``.keras`` and export),
    a corrupt export, a parser's export (its metadata says so) and the pyfunc the registry logs."""
    import lzma

    import sentencepiece

    import keras_transformer as kt
    from flows.registry import save_pyfunc
    from keras_transformer.decoding.export import export_translator
    from keras_transformer.decoding.formats import METADATA_FILE
    from keras_transformer.decoding.settings import DecodingSettings
    from keras_transformer.tokenizer import SubwordTokenizer

    corpus = ROOT / "pipelines" / "tasks" / "translation" / "corpora" / "ddtp" / "en-de"
    lines = []
    for side in ("en", "de"):
        with lzma.open(corpus / f"test.{side}.xz", "rt", encoding="utf-8") as text:
            lines += [line.strip() for _, line in zip(range(1000), text) if line.strip()]
    spm = work / "spm.model"
    # As the pipeline trains its vocabularies: identity normalisation, the project's special ids.
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=str(work / "spm"), model_type="bpe", vocab_size=500,
        normalization_rule_name="identity", pad_id=0, unk_id=1, bos_id=2, eos_id=3, minloglevel=2)
    tokenizer = SubwordTokenizer(spm)
    model = kt.Transformer(vocab_size=tokenizer.vocab_size, num_layers=1, d_model=32, num_heads=2, d_ff=64,
                           dropout=0.0)
    model.build()
    model.save(work / "model.keras")
    export = export_translator(model, tokenizer, work / "export", DecodingSettings(beam_size=1, max_length_offset=4))
    corrupt = Path(shutil.copytree(export, work / "corrupt"))
    (corrupt / "saved_model.pb").write_bytes(b"\x0a\xff\xff\xff\xff\x0f not a protobuf")
    parser = Path(shutil.copytree(export, work / "parser-export"))
    metadata = json.loads((parser / METADATA_FILE).read_text("utf-8"))
    (parser / METADATA_FILE).write_text(json.dumps({**metadata, "constraint": "BracketConstraint"}), "utf-8")
    corrupt_parser = Path(shutil.copytree(parser, work / "corrupt-parser"))
    (corrupt_parser / "saved_model.pb").write_bytes(b"\x0a\xff\xff\xff\xff\x0f not a protobuf")
    fake_keras, fake_spm = work / "x.keras", work / "fake.model"
    fake_keras.write_text("not a model\n")
    fake_spm.write_text("not a model\n")
    pyfunc = save_pyfunc("translation", export, ["The package.", "A library."], work / "pyfunc")
    return {"spm": spm, "keras": work / "model.keras", "export": export, "corrupt": corrupt, "parser": parser,
            "corrupt_parser": corrupt_parser, "fake_keras": fake_keras, "fake_spm": fake_spm, "pyfunc": pyfunc}


def span_parser(work: Path, spm: Path) -> Path:
    """An untrained span parser's ``.keras`` model: its trees are over the input words all the same."""
    from keras_transformer.models.span_parser import SpanParser
    from keras_transformer.tokenizer import SubwordTokenizer

    tokenizer = SubwordTokenizer(spm)
    starts = [i for i, piece in enumerate(tokenizer.pieces()) if piece.startswith("\u2581")]
    model = SpanParser(tokenizer.vocab_size, ["", "NP", "S", "VP"], ["DT", "NN", "VB", "."], starts, num_layers=1,
                       d_model=16, num_heads=2, d_ff=32, span_hidden=16, dropout=0.0, pad_id=tokenizer.pad_id)
    model.build()
    model.save(work / "span-parser.keras")
    return work / "span-parser.keras"


def decoding_cases(models: dict[str, Path], work: Path) -> list[dict]:
    """tests/pipelines/tasks/translation/test_translate_cli.py and .../parsing/test_parse_cli.py."""
    translate, parse = str(SCRIPTS / "translate"), str(SCRIPTS / "parse")
    keras = ["--model", str(models["keras"]), "--tokenizer", str(models["spm"])]
    bad_utf8 = b"Hello.\n\nThe caf\xc3\xa9 \xff opens.\n"
    odd = "\u0007bell, emoji \U0001f642, \u65e5\u672c\u8a9e, \u05e9\u05dc\u05d5\u05dd and \u202eright-to-left\n"
    return [
        case("translate", "invalid UTF-8 on stdin", [translate, *keras], stdin=bad_utf8),
        case("translate", "invalid UTF-8 in an argument", [translate, *keras, "fine", os.fsdecode(b"b\xc3\xa4d \xff")]),
        case("translate", "a model that does not exist", [translate, "--model", str(work / "none.keras"), "Hello."]),
        case("translate", "a .keras file that is not a Keras archive",
             [translate, "--model", str(models["fake_keras"]), "--tokenizer", str(models["spm"]), "Hello."]),
        case("translate", "a tokenizer that is not a SentencePiece model",
             [translate, "--model", str(models["keras"]), "--tokenizer", str(models["fake_spm"]), "Hello."]),
        case("translate", "a corrupt saved_model.pb", [translate, "--model", str(models["corrupt"]), "Hello."]),
        case("translate", "a parser's export", [translate, "--model", str(models["parser"]), "Hello."]),
        case("translate", "empty stdin", [translate, "--model", str(models["export"])], "answered", b""),
        case("translate", "control characters, emoji, CJK, right-to-left",
             [translate, "--model", str(models["export"])], "answered", odd.encode()),
        case("translate", "a 10,000-character line", [translate, "--model", str(models["export"])], "answered",
             ("word " * 2000).encode() + b"\n"),
        case("parse", "invalid UTF-8 on stdin", [parse, "--model", str(models["parser"])], stdin=bad_utf8),
        case("parse", "a translation model's .keras", [parse, *keras, "A sentence."]),
        case("parse", "a translation model's export", [parse, "--model", str(models["export"]), "A sentence."]),
        case("parse", "a corrupt saved_model.pb", [parse, "--model", str(models["corrupt_parser"]), "A sentence."]),
        case("parse", "a .keras file that is not a Keras archive",
             [parse, "--model", str(models["fake_keras"]), "--tokenizer", str(models["spm"]), "A sentence."]),
        case("parse", "--pretokenized with brackets among the words",
             [parse, "--model", str(models["span_parser"]), "--tokenizer", str(models["spm"]), "--pretokenized",
              "a ( b ) c"], "answered"),
    ]


def run_command(item: dict, work: Path, timeout: float) -> dict:
    """Runs one command case; its record (the command with ``work`` as ``<tmp>``)."""
    started = time.monotonic()
    try:
        done = subprocess.run(item["argv"], input=item["stdin"], capture_output=True, env=USER_ENV, cwd=work,
                              timeout=timeout, check=False)
        status, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as expired:
        status, stdout, stderr = None, expired.stdout or b"", expired.stderr or b""
    seconds = round(time.monotonic() - started, 2)
    err = stderr.decode("utf-8", "replace")
    lines = [line.replace(str(work), "<tmp>") for line in err.splitlines()]
    refused_well = status == 2 and len(lines) == 1 and "Traceback" not in err
    answered_well = status == 0 and not lines
    command = " ".join(arg.replace(str(work), "<tmp>").replace(sys.executable, "python")
                       .replace(str(SCRIPTS) + "/", "") for arg in item["argv"])
    return {"group": item["group"], "case": item["case"], "command": command,
            "stdin": None if item["stdin"] is None else item["stdin"][:80].decode("utf-8", "replace"),
            "expect": item["expect"], "exit_status": status, "seconds": seconds,
            "stderr_first_line": lines[0][:300] if lines else "", "stderr_lines": len(lines),
            "stdout_lines": len(stdout.splitlines()), "traceback": "Traceback" in err,
            "ok": refused_well if item["expect"] == "refused" else answered_well}


def served_cases() -> list[tuple[str, bytes, str | None, str]]:
    """``(case, body, content type, expect)``: tests/flows/test_serving.py's bad requests and
    benchmarks/speed/serve_load.py's malformed ones."""
    from benchmarks.speed.serve_load import body, malformed_requests
    from flows.serving import MAX_SENTENCES_PER_REQUEST, MAX_SOURCE_CHARACTERS

    # Without a content type a client sends a form: MLflow's server answers 415 naming the types it reads.
    answered = {"empty data", f"{MAX_SENTENCES_PER_REQUEST} sentences (the limit)",
                f"{MAX_SOURCE_CHARACTERS:,}-character source (the limit)"}
    cases = [(name, data, kind, "answered" if name in answered else "refused")
             for name, data, kind in malformed_requests(MAX_SOURCE_CHARACTERS, MAX_SENTENCES_PER_REQUEST)]
    json_type = "application/json"
    cases += [
        ("a null among sentences", body(["A sentence.", None]), json_type, "refused"),
        ("a record's null", json.dumps({"dataframe_records": [{"source": None}]}).encode(), json_type, "refused"),
        ("two columns, neither the input", json.dumps({"dataframe_split": {"columns": ["text", "other"],
                                                                           "data": [["a", "b"]]}}).encode(),
         json_type, "refused"),
        ("control characters, emoji, CJK, right-to-left",
         body(["\u0007bell, emoji \U0001f642, \u65e5\u672c\u8a9e, \u05e9\u05dc\u05d5\u05dd"]), json_type, "answered"),
    ]
    return cases


def run_served(pyfunc: Path, work: Path, timeout: float) -> list[dict]:
    """The served cases against ``mlflow models serve`` of ``pyfunc`` on 127.0.0.1."""
    from benchmarks.speed.serve_load import Server, post

    server = Server(str(pyfunc), f"sqlite:///{work / 'mlflow.db'}", 1, work / "serve.log", timeout)
    records = []
    try:
        for name, data, kind, expect in served_cases():
            started = time.monotonic()
            status, text = post(f"{server.url}/invocations", data, timeout, kind)
            seconds = round(time.monotonic() - started, 2)
            try:
                answer = json.loads(text)
            except ValueError:
                answer = None
            message = str(answer.get("message", "")) if isinstance(answer, dict) and "message" in answer else text
            lines = message.splitlines()
            traceback = "Traceback" in text or "stack_trace" in text
            ok = (status == 200 and isinstance(answer, dict) and "predictions" in answer) if expect == "answered" \
                else (400 <= status < 500 and isinstance(answer, dict) and len(lines) == 1 and not traceback)
            records.append({"group": "served", "case": name, "request": data[:120].decode("utf-8", "replace"),
                            "content_type": kind, "expect": expect, "http_status": status, "seconds": seconds,
                            "message_first_line": lines[0][:300] if lines else "", "message_lines": len(lines),
                            "traceback": traceback, "ok": ok})
        records.append({"group": "served", "case": "the server answers after them", "expect": "answered",
                        "http_status": post(f"{server.url}/invocations", served_cases()[-1][1], timeout)[0],
                        "ok": server.process.poll() is None})
    finally:
        server.stop()
    return records


def measure(groups: list[str], timeout: float) -> dict:
    """The records of every case of ``groups``, group by group in their order."""
    with tempfile.TemporaryDirectory(prefix="hostile-") as directory:
        work = Path(directory)
        models = None
        if {"translate", "parse", "served"} & set(groups):
            (work / "models").mkdir()
            models = tiny_models(work / "models")
            models["span_parser"] = span_parser(work / "models", models["spm"])
        records = []
        for group in groups:
            if group == "served":
                records += run_served(models["pyfunc"], work, timeout)
                continue
            if group == "flows":
                items = flows_cases(work / "flows")
            elif group == "parse-eval":
                items = parse_eval_cases(work / "parse-eval")
            else:
                items = [item for item in decoding_cases(models, work) if item["group"] == group]
            for item in items:
                records.append(run_command(item, work, timeout))
                logger.info("%s / %s: %s", group, item["case"], "ok" if records[-1]["ok"] else "NOT OK")
    summary = {}
    for group in groups:
        mine = [record for record in records if record["group"] == group]
        summary[group] = {"cases": len(mine), "ok": sum(record["ok"] for record in mine),
                          "not_ok": [record["case"] for record in mine if not record["ok"]]}
    return {"benchmark": "hostile_inputs", "groups": groups, "cases": len(records),
            "ok": sum(record["ok"] for record in records), "summary": summary, "records": records}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=lambda text: text.split(","), default=list(GROUPS),
                        help=f"which entry points (default all: {','.join(GROUPS)})")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a case (or the server's start) may take")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.groups) - set(GROUPS))
    if unknown:
        parser.error(f"--groups: unknown {unknown}; known: {', '.join(GROUPS)}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    emit(measure(args.groups, args.timeout), args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
