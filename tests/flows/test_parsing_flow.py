"""The parsing flow end to end on the suite's toy treebank (tests/pipelines/tasks/parsing/toy_treebank.py):
real Prefect (temporary local API), real MLflow, the real stages shared with translation; a tiny
model and a few steps."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from keras_transformer.decoding.settings import DecodingSettings
from tests.flows.prefect_api import flow_run_logs

REPO = Path(__file__).resolve().parents[2]
#: Test sentences the flow scores (and the served parser must answer identically).
SCORED = 24


TINY = {"num_layers": 1, "d_model": 32, "num_heads": 2, "d_ff": 64}


def _run_flow(tmp_path, toy_treebank, train: dict, evaluation: dict, train_trees: int = 200, log_every_steps: int = 3):
    from flows.parsing import parsing_pipeline

    overrides = {
        "run_dir": str(tmp_path / "run"),
        "data": {"path": str(toy_treebank), "max_train_trees": train_trees},
        "tokenizer": {"vocab_size": 600},
        "input": {"tokens_per_batch": 1024},
        "train": {"train_minutes": 0, "train_steps": 9, "checkpoint_every_steps": 3,
                  "validate_every_steps": 9, "validation_max_batches": 2, "progress_bar": False, **train},
        "averaging": {"last_n": 2},
        "evaluation": {"max_sentences": SCORED, **evaluation},
        "tracking": {"experiment": "parsing-flow-test", "log_every_steps": log_every_steps},
    }
    result = parsing_pipeline(str(REPO / "configs" / "parsing" / "sample-cpu.yaml"), overrides)
    return tmp_path, result


#: Section 6.3's beam 21 and length penalty 0.3 (parser-cpu's), no repetition guard, the evaluation's length cap.
SEQ2SEQ_DECODING = DecodingSettings(beam_size=21, length_penalty=0.3, max_length_offset=40).to_dict()
#: The seq2seq parser trains until its trees have phrases (the module's docstring of
#: tests/pipelines/tasks/parsing/toy_treebank.py): an export that decoded wrongly would then differ.
SEQ2SEQ_STEPS, SEQ2SEQ_CHECKPOINT_EVERY = 180, 60
#: The steps each flow trains, and its last two checkpoints.
STEPS = {"parsed": 9, "parsed_seq2seq": SEQ2SEQ_STEPS}


@pytest.fixture(scope="module")
def parsed(tmp_path_factory, toy_treebank):
    """The shipped configuration: the span parser (span-parser-cpu), its bias chosen on the validation files."""
    return _run_flow(tmp_path_factory.mktemp("parsing"), toy_treebank, {"model": {**TINY, "span_hidden": 32}}, {})


@pytest.fixture(scope="module")
def parsed_seq2seq(tmp_path_factory, toy_treebank):
    """Section 6.3's sequence-to-sequence parser (parser-cpu), trained on the whole toy treebank
    until it nests; the preset's beam 21 and alpha 0.3 stay, a shorter output cap than section 6.3's."""
    model = {"num_layers": 2, "d_model": 64, "num_heads": 2, "d_ff": 128}
    return _run_flow(tmp_path_factory.mktemp("parsing-seq2seq"), toy_treebank,
                     {"preset": "parser-cpu", "average_window": 0.1, "model": model, "train_steps": SEQ2SEQ_STEPS,
                      "checkpoint_every_steps": SEQ2SEQ_CHECKPOINT_EVERY, "validate_every_steps": SEQ2SEQ_STEPS},
                     {"decoding": {"max_length_offset": 40}}, train_trees=600,
                     log_every_steps=SEQ2SEQ_CHECKPOINT_EVERY)  # its steps' curves in a few points


@pytest.mark.parametrize("flow", ["parsed", "parsed_seq2seq"])
def test_the_parsing_flow_runs_the_shared_stages_and_tracks_them(flow, request):
    from mlflow.tracking import MlflowClient

    tmp_path, result = request.getfixturevalue(flow)
    work = Path(result.run_path)
    assert result.task == "parsing" and result.training.final_step == STEPS[flow]
    assert [Path(p).name for p in result.vocabulary.distinct()] == ["spm_en.model", "spm_tree.model"]
    scores = json.loads((work / "evaluation" / "scores.json").read_text())
    if flow == "parsed":
        # The bias the calibration chose on the validation files is the one the evaluation decoded with.
        calibration = result.model.calibration
        assert calibration["split"] == "validation" and len(calibration["f1_by_bias"]) >= 5
        assert scores["evaluation"]["decoding"] == {"search": "cky", "bias": calibration["bias"]}
    else:
        assert result.model.calibration is None
        assert scores["evaluation"]["decoding"] == SEQ2SEQ_DECODING
    assert scores["valid_before_repair"] + scores["repaired"] == SCORED and scores["all"]["sentences"] == SCORED
    assert scores["baselines"]["right_branching"]["all"]["fmeasure"] > 0
    for name in ("gold.trees", "predicted.trees", "per_sentence.jsonl"):
        assert len((work / "evaluation" / name).read_text().splitlines()) == SCORED

    state = json.loads((tmp_path / "run" / "mlflow_run.json").read_text())
    client = MlflowClient(state["tracking_uri"])
    run = client.get_run(result.run_id)
    assert run.info.status == "FINISHED" and run.data.tags["task"] == "parsing"
    for key in ("test/f1", "test/complete_match", "test/tagging_accuracy", "test/baseline_right_branching_f1",
                "val/loss"):
        assert key in run.data.metrics, key
    # What the calibration chose is a setting the evaluation used: a param, not a chart of one dot.
    assert run.data.params.get("calibration.decoding_bias") == (str(calibration["bias"]) if flow == "parsed" else None)
    artifacts = {a.path for a in client.list_artifacts(result.run_id, "evaluation")}
    assert {"evaluation/predicted.trees", "evaluation/per_sentence.jsonl", "evaluation/scores.json"} <= artifacts
    assert run.data.params["data.max_train_trees"] == ("600" if flow == "parsed_seq2seq" else "200")
    # The run's log gives figures, not dicts: the calibration's line names the bias and each bias' F1.
    logs = flow_run_logs(run.data.tags["prefect.flow_run_id"])
    assert "{'" not in logs, [line for line in logs.splitlines() if "{'" in line]
    if flow == "parsed":
        assert f"calibrated on the validation split: bias {result.model.calibration['bias']:.4g}, split validation, " \
               "f1_by_bias (" in logs


def test_the_export_decodes_as_the_evaluation_did(parsed, parsed_seq2seq):
    _, result = parsed
    metadata = json.loads((Path(result.export.directory) / "assets.extra" / "translator.json").read_text())
    assert metadata["kind"] == "chart_parser" and metadata["bias"] == result.model.calibration["bias"]
    assert result.export.settings == {"search": "cky", "bias": result.model.calibration["bias"]}

    _, result = parsed_seq2seq
    metadata = json.loads((Path(result.export.directory) / "assets.extra" / "translator.json").read_text())
    scores = json.loads((Path(result.run_path) / "evaluation" / "scores.json").read_text())
    # Section 6.3's beam 21 and alpha 0.3 (the parser preset's), the evaluation's length cap, the
    # tree constraint: the export is the decoder that was scored.
    assert metadata["decoding"] == scores["evaluation"]["decoding"] == SEQ2SEQ_DECODING
    assert metadata["constraint"] == "BracketConstraint"


@pytest.mark.parametrize("flow", ["parsed", "parsed_seq2seq"])
def test_the_export_the_registered_pyfunc_and_the_served_model_give_the_scored_trees(flow, request, tmp_path,
                                                                                     monkeypatch):
    """What a user gets (export, ``models:/...@champion`` loaded or served) is what the flow scored,
    tree for tree, on every scored sentence, for either parser."""
    from keras_transformer.decoding.export import load_exported
    from pipelines.tasks.parsing.linearize import best_tree
    from pipelines.tasks.parsing.parse_cli import ptb_tokenize

    from .conftest import champion_outputs

    run_tmp, result = request.getfixturevalue(flow)
    evaluation = Path(result.run_path) / "evaluation"
    sentences = evaluation.joinpath("sources.txt").read_text("utf-8").splitlines()
    scored = evaluation.joinpath("predicted.trees").read_text("utf-8").splitlines()
    assert len(sentences) == len(scored) == SCORED
    # The served parser splits raw text into PTB tokens; the corpus' sentences already are, and
    # compare where splitting them again leaves them as they are (NLTK turns a lone '' after a
    # comma into ``, a quirk of pretokenized input only).
    kept = [i for i, sentence in enumerate(sentences) if ptb_tokenize(sentence) == sentence.split()]
    assert len(kept) >= 20
    sentences, scored = [sentences[i] for i in kept], [scored[i] for i in kept]

    export = load_exported(result.export.directory).translate(sentences, n_best=True)
    assert [best_tree(hypotheses, s.split())[0].to_string() for hypotheses, s in zip(export, sentences)] == scored
    # Not a vacuous comparison: most trees have phrases, which a wrong export would get wrong.
    assert sum(tree.count("(") - len(s.split()) >= 3 for tree, s in zip(scored, sentences)) >= len(scored) // 2

    assert champion_outputs(run_tmp, result, "tree", sentences, monkeypatch, tmp_path / "serve.log") \
        == (scored, scored)


#: Two sentences and an empty line between them, the second with brackets and a contraction to split.
PARSE_INPUT = "Ms. Haag plays Elianti.\n\nIt isn't (really) cheap, he said.\n"


# The .keras path of the seq2seq parser is the translation command's, tested there.
@pytest.mark.parametrize("source, flow", [("export", "parsed"), ("keras", "parsed"), ("export", "parsed_seq2seq")])
def test_parse_command_prints_one_tree_per_line_over_the_input_words(flow, source, request):
    from pipelines.tasks.parsing import parse_cli
    from pipelines.tasks.parsing.tree import parse_tree
    from tests.commands import run_main

    _, result = request.getfixturevalue(flow)
    if source == "export":
        model = ["--model", result.export.directory]
    else:
        model = ["--model", result.model.path, "--tokenizer", result.vocabulary.distinct()[0],
                 "--target-tokenizer", result.vocabulary.distinct()[1]]
    if (source, flow) == ("export", "parsed"):  # what a user runs on the shipped parser: its own process
        completed = subprocess.run([sys.executable, "-m", "pipelines.tasks.parsing.parse_cli", *model],
                                   input=PARSE_INPUT, capture_output=True, text=True, timeout=600, cwd=REPO)
        code, out, err = completed.returncode, completed.stdout, completed.stderr
    else:
        code, out, err = run_main(parse_cli.main, *model, stdin=PARSE_INPUT)
    assert code == 0, err[-3000:]
    lines = out.splitlines()
    assert len(lines) == 3 and lines[1] == ""
    assert parse_tree(lines[0]).words() == ["Ms.", "Haag", "plays", "Elianti", "."]
    assert parse_tree(lines[2]).words() == ["It", "is", "n't", "-LRB-", "really", "-RRB-", "cheap", ",",
                                            "he", "said", "."]
    if source == "keras":  # a chart search has no beam: the span parser refuses one
        code, out, err = run_main(parse_cli.main, *model, "--beam-size", "2", stdin="Ms. Haag plays Elianti.\n")
        assert code == 2 and "chart search" in err and "Traceback" not in err and out == ""


@pytest.mark.parametrize("run", ["parsed_seq2seq", "parsed"])
def test_the_checkpoint_benchmark_scores_each_averaging_window_on_the_dev_files(run, request, tmp_path):
    """``benchmarks/probes/bench_parser_checkpoints.py`` on a finished run: one dev F1 per window (a span
    parser's at its best constituent bias)."""
    from benchmarks.probes import bench_parser_checkpoints
    from tests.commands import run_main

    _, result = request.getfixturevalue(run)
    output = tmp_path / "windows.json"
    code, _, err = run_main(bench_parser_checkpoints.main, "--run", result.run_path, "--windows", "1,2,9",
                            "--max-sentences", "4", "--max-length-offset", "8", "--output", output)
    assert code == 0, err[-3000:]
    report = json.loads(output.read_text())
    # Three checkpoints were written (every third of the steps); a window of 9 is skipped, not faked.
    every = STEPS[run] // 3
    assert [r["window"] for r in report["results"]] == [1, 2]
    assert report["results"][1]["checkpoints"] == [f"ckpt-{2 * every}", f"ckpt-{3 * every}"]
    assert all(r["sentences"] == 4 and 0 <= r["f1"] <= 100 for r in report["results"])
    assert report["best_window"] in (1, 2)
    if run == "parsed":
        assert all(r["f1"] == max(r["f1_by_bias"].values()) and str(r["bias"]) in r["f1_by_bias"]
                   for r in report["results"])


def test_the_run_report_checks_the_export_against_every_scored_tree(parsed, tmp_path):
    """``benchmarks/probes/parsing_run_report.py`` on a finished run: scores, stages, and 0 differing trees."""
    from benchmarks.probes import parsing_run_report
    from tests.commands import run_main

    _, result = parsed
    output = tmp_path / "report.json"
    code, _, err = run_main(parsing_run_report.main, "--run", result.run_path, "--output", output)
    assert code == 0, err[-3000:]
    report = json.loads(output.read_text())
    assert report["export"] == {**report["export"], "sentences": SCORED, "trees_differing_from_scored": 0,
                                "kind": "chart_parser"}
    assert report["stages"]["calibration"]["calibration"] == result.model.calibration
    assert report["final_step"] == 9 and report["test"]["sentences"] == SCORED
    by_frequency = report["test_tagging_by_training_frequency"]
    assert sorted(by_frequency) == ["seen 1-2", "seen 3+", "unseen"]
    # Every scored word is counted once (the toy test trees are all parsed over their own words).
    assert sum(group["words"] for group in by_frequency.values()) == report["test"]["words"]
