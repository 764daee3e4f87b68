"""One trained model, four ways to serve it, side by side: the Keras ``Translator``, the SavedModel (what
``make serve`` serves by default), CTranslate2 float32 and int8, each at 1 and 2 threads; and bulk translation
(the int8 export asked for every paragraph at once, as synthesis asks) beside the engine alone
(:mod:`benchmarks.speed.raw_engine`).

    python -m benchmarks.speed.serving_engines --model RUN/averaged/model.keras \\
        --tokenizer RUN_DIR/tokenizer/spm_shared.model --corpus RUN_DIR/data/ddtp-en-de \\
        --choose-on-validation --output benchmarks/results/serving-engines-DATE.json

Every engine decodes the same paragraphs of each test split with the model's own decoding (beam 4 and the
preset's options; the CTranslate2 directories get engine options chosen on the validation split as the
flow chooses them, unless ``--engine-options`` gives them), in its own process (threads are set before
TensorFlow starts; the peak memory is the process's); the exports text in and text out through the served
pyfunc's ``predict`` (:mod:`flows.serving`), in requests of 64 paragraphs. Reported per engine and thread count: load
seconds, paragraphs/s and target pieces/s per split, peak RSS, BLEU, chrF and looping translations; then
greedy decoding of every sentence of the splits by the Keras model and CTranslate2 float32 on the same
weights (a faithful conversion gives the same pieces), and the ratios to the SavedModel and of bulk
translation to the engine alone (``--engines ctranslate2-int8-bulk ctranslate2-raw``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from flows.tools.report import emit

logger = logging.getLogger("serving_engines")

ENGINES = ("keras", "savedmodel", "ctranslate2-float32", "ctranslate2-int8", "ctranslate2-int8-bulk",
           "ctranslate2-raw")
#: Rows that are not served through the pyfunc: the int8 export called directly, and its engine alone.
BULK, RAW = "ctranslate2-int8-bulk", "ctranslate2-raw"
#: How CTranslate2's decoding differs from ours (keras_transformer.decoding.ctranslate2_translator).
DIFFERENCES = {
    "length_penalty": "ours: GNMT's ((5 + |Y|) / 6) ** alpha; the engine's: |Y| ** p, p chosen on validation",
    "repetition_guard": "ours: no third copy in a row of an n-gram; the engine's nearest: no_repeat_ngram_size "
                        "(no n-gram twice anywhere), chosen on validation (0: none)",
    "max_length_offset, min_length_ratio": "the same per sentence: the engine's batches hold one source length",
    "empty source": "ours decodes it; the engine returns an empty translation",
}
SPLITS = ("test", "test_unseen")


# ---------------------------------------------------------------------------------- one engine (a worker process)


def _load(engine: str, paths: dict, threads: int):
    if engine == "keras":
        from keras_transformer.checkpoints.saved_model import load_translator

        return load_translator(paths["model"], paths["tokenizer"])
    from keras_transformer.decoding.export import load_exported

    return load_exported(paths[engine], threads=threads)


class _Served:
    """An export as the served model runs it: the registered pyfunc's ``predict``, requests of at most 64 rows."""

    def __init__(self, translator):
        from flows.serving import ExportedModel

        self.translator = translator
        self.model = ExportedModel("translation")
        self.model.translator = translator

    def translate(self, sentences, greedy=False):
        import pandas as pd

        from flows.serving import INPUT_COLUMN, MAX_SENTENCES_PER_REQUEST

        if greedy:
            return self.translator.translate(sentences, greedy=True)
        out = []
        for k in range(0, len(sentences), MAX_SENTENCES_PER_REQUEST):
            request = pd.DataFrame({INPUT_COLUMN: sentences[k : k + MAX_SENTENCES_PER_REQUEST]})
            out.extend(self.model.predict(None, request)["translation"].tolist())
        return out


def worker(engine: str, threads: int, paths: dict, inputs: dict, greedy: bool) -> dict:
    """Loads ``engine`` on ``threads`` threads and translates every split of ``inputs``, an export through
    the served pyfunc's ``predict``; timings and outputs."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from flows.serving import limit_tensorflow_threads

    limit_tensorflow_threads(threads)  # as a served worker limits them
    if engine == RAW:
        return _raw_worker(paths, threads, inputs)
    start = time.perf_counter()
    translator = _load(engine if engine != BULK else "ctranslate2-int8", paths, threads)
    if engine not in ("keras", BULK):
        translator = _Served(translator)
    result = {"engine": engine, "threads": threads, "greedy": greedy, "load_seconds": time.perf_counter() - start,
              "splits": {}}
    for split, sentences in inputs.items():
        translator.translate(sentences[:4], **({"greedy": True} if greedy else {}))  # traced before timing
        start, cpu = time.perf_counter(), time.process_time()
        outputs = translator.translate(sentences, **({"greedy": True} if greedy else {}))
        result["splits"][split] = {"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu,
                                   "outputs": outputs}
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def _raw_worker(paths: dict, threads: int, inputs: dict) -> dict:
    """The engine alone on the int8 export's weights: only its calls timed (sentences tokenized before)."""
    from benchmarks.speed.raw_engine import RawEngine

    start = time.perf_counter()
    engine = RawEngine(paths["ctranslate2-int8"], threads)
    result = {"engine": RAW, "threads": threads, "greedy": False, "load_seconds": time.perf_counter() - start,
              "splits": {}}
    for split, paragraphs in inputs.items():
        prepared = engine.prepare(paragraphs)
        engine.translate(prepared["tokens"][:4])
        start, cpu = time.perf_counter(), time.process_time()
        pieces = engine.translate(prepared["tokens"])
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        result["splits"][split] = {"seconds": seconds, "cpu_seconds": cpu, "outputs": engine.texts(prepared, pieces),
                                   "sentences": len(pieces)}
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def run_worker(engine: str, threads: int, paths: dict, inputs_file: Path, greedy: bool, work: Path) -> dict:
    out = work / f"{engine}-{threads}{'-greedy' if greedy else ''}.json"
    command = [sys.executable, "-m", "benchmarks.speed.serving_engines", "--worker", engine, "--threads", str(threads),
               "--paths", json.dumps(paths), "--inputs", str(inputs_file), "--worker-output", str(out)]
    if greedy:
        command.append("--worker-greedy")
    logger.info("%s on %d thread(s)%s", engine, threads, " (greedy)" if greedy else "")
    subprocess.run(command, check=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    return json.loads(out.read_text("utf-8"))


# ---------------------------------------------------------------------------------- the whole comparison


def prepare(args, work: Path) -> tuple[dict, dict, dict]:
    """The exports (made here unless given), the paragraphs and references of each split, and the sentences."""
    import keras
    import tensorflow as tf

    import keras_transformer.models.span_parser  # noqa: F401  (registers classes)
    import keras_transformer.models.transformer  # noqa: F401  (registers classes)
    from keras_transformer.decoding.sentences import split_bullets, split_sentences
    from keras_transformer.tokenizer import SubwordTokenizer
    from pipelines.corpus import Corpus

    corpus = Corpus.load(args.corpus)
    splits = {split: list(corpus.pairs(split))[: args.max_paragraphs] for split in args.splits}
    paths = {"model": str(args.model), "tokenizer": str(args.tokenizer)}
    model = keras.saving.load_model(args.model, compile=False)
    tokenizer = SubwordTokenizer(args.tokenizer)
    if args.savedmodel or "savedmodel" in args.engines:
        paths["savedmodel"] = str(args.savedmodel or model.export_decoder(work / "savedmodel", tokenizer))
    for quantization in ("float32", "int8"):
        path = model.export_decoder(work / f"ctranslate2-{quantization}", tokenizer, format="ctranslate2",
                                    quantization=quantization)
        if args.engine_options:
            _set_engine(path, json.loads(args.engine_options))
        elif args.choose_on_validation:
            _choose(path, corpus, work / f"choice-{quantization}")
        paths[f"ctranslate2-{quantization}"] = str(path)
    sentences = {}
    for split, pairs in splits.items():
        parts = split_sentences(tf.constant([s for s, _ in pairs]))
        sentences[split] = [b.decode("utf-8") for b in split_bullets(parts.flat_values)[1].numpy()]
    return paths, splits, sentences


def _set_engine(path: Path, options: dict) -> None:
    from keras_transformer.decoding.formats import METADATA_FILE

    metadata = json.loads((path / METADATA_FILE).read_text("utf-8"))
    metadata["engine"] = {**metadata["engine"], **options}
    (path / METADATA_FILE).write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n", "utf-8")


def _choose(path: Path, corpus, work: Path) -> None:
    from pipelines.engine_choice import choose_engine_options, validation_config
    from pipelines.tasks.translation.task import TranslationTask

    task = TranslationTask()
    config = validation_config(task.eval_config())
    choose_engine_options(path, lambda translator, out: task.evaluate(translator, Path(corpus.directory), config, out),
                          work)


def score(outputs: list[str], pairs: list[tuple[str, str]], target_tokenizer) -> dict:
    import tensorflow as tf
    from sacrebleu.metrics import BLEU, CHRF

    from pipelines.tasks.translation.repetition import loop_counts

    references = [t for _, t in pairs]
    pieces = int(target_tokenizer.tokenize(tf.constant(outputs)).row_lengths().numpy().sum()) if outputs else 0
    return {"bleu": BLEU().corpus_score(outputs, [references]).score,
            "chrf": CHRF().corpus_score(outputs, [references]).score,
            "looping": loop_counts(outputs, references)["hypotheses"], "target_pieces": pieces}


def compare(args) -> dict:
    from keras_transformer.tokenizer import SubwordTokenizer

    work = Path(tempfile.mkdtemp(prefix="serving-engines-"))
    paths, splits, sentences = prepare(args, work)
    tokenizer = SubwordTokenizer(args.tokenizer)
    inputs = work / "paragraphs.json"
    inputs.write_text(json.dumps({s: [p for p, _ in pairs] for s, pairs in splits.items()}), "utf-8")
    rows, outputs = [], {}
    for engine in args.engines:
        for threads in args.threads:
            result = run_worker(engine, threads, paths, inputs, False, work)
            row = {"engine": engine, "threads": threads, "load_seconds": round(result["load_seconds"], 2),
                   "peak_rss_mb": round(result["peak_rss_mb"]), "splits": {}}
            for split, timing in result["splits"].items():
                figures = score(timing["outputs"], splits[split], tokenizer)
                row["splits"][split] = {
                    "paragraphs": len(splits[split]), "seconds": round(timing["seconds"], 2),
                    "cpu_seconds": round(timing["cpu_seconds"], 2),
                    "paragraphs_per_second": round(len(splits[split]) / timing["seconds"], 2),
                    "target_pieces_per_second": round(figures.pop("target_pieces") / timing["seconds"], 1),
                    **{k: round(v, 2) if isinstance(v, float) else v for k, v in figures.items()}}
            rows.append(row)
            outputs[(engine, threads)] = result["splits"]
    engines = {q: json.loads((Path(paths[f"ctranslate2-{q}"]) / "assets.extra" / "translator.json").read_text())
               for q in ("float32", "int8")}
    report = {"benchmark": "serving_engines", "model": str(args.model), "corpus": str(args.corpus),
              "decoding": "the model's own (its preset's), beam search",
              "ctranslate2_engine_options": {q: {"engine": m["engine"], "choice": m.get("engine_choice")}
                                             for q, m in engines.items()},
              "what_differs": DIFFERENCES, "rows": rows,
              "ratios_to_savedmodel": _ratios(rows),
              "bulk_to_raw_engine": _bulk_to_raw(rows),
              "same_outputs_across_threads": {
                  engine: all(outputs[(engine, args.threads[0])][s]["outputs"] == outputs[(engine, t)][s]["outputs"]
                              for t in args.threads for s in splits) for engine in args.engines}}
    if BULK in args.engines and "ctranslate2-int8" in args.engines:
        # A sentence's translation does not depend on what else is asked: one call or requests of 64.
        report["bulk_same_as_served"] = all(outputs[(BULK, t)][s]["outputs"] == outputs[("ctranslate2-int8", t)][s][
            "outputs"] for t in args.threads for s in splits)
    if args.greedy:
        greedy_inputs = work / "sentences.json"
        greedy_inputs.write_text(json.dumps(sentences), "utf-8")
        threads = max(args.threads)
        ours = run_worker("keras", threads, paths, greedy_inputs, True, work)
        engine = run_worker("ctranslate2-float32", threads, paths, greedy_inputs, True, work)
        report["greedy_parity"] = {
            split: _parity(ours["splits"][split]["outputs"], engine["splits"][split]["outputs"], sentences[split])
            for split in sentences}
        report["greedy_seconds"] = {"keras": {s: round(v["seconds"], 2) for s, v in ours["splits"].items()},
                                    "ctranslate2-float32": {s: round(v["seconds"], 2)
                                                            for s, v in engine["splits"].items()}}
    return report


def _parity(ours: list[str], engine: list[str], sentences: list[str]) -> dict:
    same = [a == b for a, b in zip(ours, engine)]
    return {"sentences": len(same), "identical": sum(same), "fraction": round(sum(same) / max(len(same), 1), 4),
            "first_differences": [{"source": s, "ours": a, "ctranslate2": b}
                                  for s, a, b, ok in zip(sentences, ours, engine, same) if not ok][:10]}


def _ratios(rows: list[dict]) -> dict:
    base = {(r["threads"], s): v["paragraphs_per_second"] for r in rows if r["engine"] == "savedmodel"
            for s, v in r["splits"].items()}
    bleu = {(r["threads"], s): v["bleu"] for r in rows if r["engine"] == "savedmodel" for s, v in r["splits"].items()}
    ratios = {}
    for row in rows:
        for split, figures in row["splits"].items():
            key = (row["threads"], split)
            if key in base:
                ratios[f"{row['engine']}/{row['threads']}t/{split}"] = {
                    "speed": round(figures["paragraphs_per_second"] / base[key], 2),
                    "bleu_difference": round(figures["bleu"] - bleu[key], 2)}
    return ratios


def _bulk_to_raw(rows: list[dict]) -> dict:
    """Per thread count and split, the bulk translation's speed over the engine alone's (target: >= 0.8): by
    the clock, and by the process' CPU seconds (what a machine shared with other work still measures)."""
    raw = {(r["threads"], s): v for r in rows if r["engine"] == RAW for s, v in r["splits"].items()}
    return {f"{row['threads']}t/{split}": {
        "speed": round(figures["paragraphs_per_second"] / raw[(row["threads"], split)]["paragraphs_per_second"], 2),
        "cpu": round(raw[(row["threads"], split)]["cpu_seconds"] / figures["cpu_seconds"], 2)}
        for row in rows if row["engine"] == BULK for split, figures in row["splits"].items()
        if (row["threads"], split) in raw}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="the trained .keras model (a run's averaged/model.keras)")
    parser.add_argument("--tokenizer", type=Path, help="its SentencePiece model")
    parser.add_argument("--corpus", type=Path, help="the prepared corpus directory")
    parser.add_argument("--savedmodel", type=Path, help="the run's export (default: exported here)")
    parser.add_argument("--splits", nargs="+", default=list(SPLITS))
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--max-paragraphs", type=int, default=None, help="the first N of each split (quick runs)")
    parser.add_argument("--engine-options", help="CTranslate2 engine options as JSON, instead of choosing them")
    parser.add_argument("--choose-on-validation", action="store_true",
                        help="choose the CTranslate2 engine options on the validation split, as the flow does")
    parser.add_argument("--no-greedy", dest="greedy", action="store_false", help="skip the greedy parity check")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--paths", help=argparse.SUPPRESS)
    parser.add_argument("--inputs", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--worker-output", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--worker-greedy", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.worker:
        inputs = json.loads(args.inputs.read_text("utf-8"))
        result = worker(args.worker, args.threads[0], json.loads(args.paths), inputs, args.worker_greedy)
        args.worker_output.write_text(json.dumps(result), "utf-8")
        return 0
    if not (args.model and args.tokenizer and args.corpus):
        parser.error("--model, --tokenizer and --corpus are required")
    emit(compare(args), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
