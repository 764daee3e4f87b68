"""The flows' command line as a user runs it (a subprocess of ``python -m flows.translation``):
user errors exit 2 with one line and no traceback, found before any server or model starts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.flows.conftest import REPO, harness_api, write_config


@pytest.fixture(scope="module", autouse=True)
def prefect_server():
    """Replaces the temporary in-process API of ``conftest.py``: these runs start their own, or none."""
    yield


@pytest.fixture(scope="module")
def shared_api():
    """The environment that sends a run to a Prefect API the module's runs share: for the runs whose checks
    are not about start-up (each run's own temporary server took seconds of CPU to start)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield harness_api()


#: The module's Prefect home, outside the checkout and ~/.prefect: every run starts its temporary server from
#: it, and only the first creates its database (its migrations took a start 7-8 s more).
_PREFECT_HOME: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def prefect_home(tmp_path_factory):
    _PREFECT_HOME.append(str(tmp_path_factory.mktemp("prefect-home")))
    yield
    _PREFECT_HOME.clear()


def run_flow(*args: str, cwd, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(REPO), "PREFECT_HOME": _PREFECT_HOME[0]}
    environment.pop("TF_CPP_MIN_LOG_LEVEL", None)  # the entry point must quieten TensorFlow itself
    environment.pop("PREFECT_API_URL", None)  # a temporary server of its own, as a user's run has, unless in env
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "flows.translation", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(done: subprocess.CompletedProcess, *expected: str) -> str:
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
    line = lines[0]
    assert line.startswith("python -m flows.translation: error: "), line
    for text in expected:
        assert text in line, line
    # Found before anything started: no Prefect server, no TensorFlow, nothing written.
    assert "Traceback" not in done.stderr and "prefect" not in done.stderr.lower()
    return line


def test_a_misspelt_setting_exits_2_with_one_line_naming_it_and_the_closest_key(tmp_path):
    config = write_config(tmp_path)
    done = run_flow("--config", str(config), "--set", "train.warmup_stepz=10", cwd=tmp_path)
    assert_one_line_error(done, "--set train.warmup_stepz: unknown setting", "did you mean train.warmup_steps?")
    assert not (tmp_path / "run").exists()

    text = config.read_text().replace("  validate_every_steps:", "  validate_evry_steps:")
    config.write_text(text)
    line_number = next(i for i, line in enumerate(text.splitlines(), 1) if "validate_evry_steps" in line)
    done = run_flow("--config", str(config), cwd=tmp_path)
    assert_one_line_error(done, f"{config}:{line_number}: train.validate_evry_steps: unknown setting",
                          "did you mean train.validate_every_steps?")


def test_a_missing_data_folder_exits_2_with_one_line_naming_the_setting(tmp_path):
    config = write_config(tmp_path)
    missing = tmp_path / "no-such-corpus"
    done = run_flow("--config", str(config), "--set", "data.source=folder", "--set", f"data.folder={missing}",
                    cwd=tmp_path)
    assert_one_line_error(done, f"data.folder: {missing} does not exist")
    assert not (tmp_path / "run" / "runs").exists()
    missing.mkdir()  # there, but without parallel files named as the data stage expects
    done = run_flow("--config", str(config), "--set", "data.source=folder", "--set", f"data.folder={missing}",
                    cwd=tmp_path)
    assert_one_line_error(done, f"data.folder: {missing}: no parallel files for en-de")


@pytest.mark.slow
def test_a_data_error_found_in_a_stage_exits_2_without_a_traceback(tmp_path, shared_api):
    """Parallel files of blank lines pass the checks before start-up (what is left after cleaning
    is the data stage's to find): Prefect's lines about the failed run lose their traceback, and
    the command's error line names the split and its files."""
    config = write_config(tmp_path)
    corpus = tmp_path / "blank"
    corpus.mkdir()
    (corpus / "news.train.en").write_text("\n\n")
    (corpus / "news.train.de").write_text("\n\n")
    done = run_flow("--config", str(config), "--set", "data.source=folder", "--set", f"data.folder={corpus}",
                    cwd=tmp_path, env=shared_api)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("python -m flows.translation: error: ")]
    assert len(errors) == 1 and "is empty" in errors[0] and "news.train.en" in errors[0], done.stderr[-3000:]


@pytest.mark.parametrize("files, expected", [
    ({"news.train.en": b"One.\nTwo.\n", "news.train.de": b"Eins.\n"},
     ["data.folder: mismatched line counts: ", "news.train.en has 2 lines but ", "news.train.de has 1 lines"]),
    ({"news.train.en": b"One.\nTwo.\n", "news.train.de": b"Eins.\n\xff zwei\n"},
     ["data.folder: ", "news.train.de:2: not valid UTF-8 (invalid start byte at byte 0 of the line"]),
    ({"news.train.en": b"", "news.train.de": b""}, ["data.folder: ", "news.train.en: empty file"]),
    ({"news.train.en": b"One.\n", "news.train.de": b"Eins.\n", "news.test.en": b"Two.\n", "news.test.de": b""},
     ["data.folder: ", "news.test.de: empty file"]),
])
def test_a_folder_the_data_stage_could_not_read_is_refused_before_start_up(tmp_path, files, expected):
    """Misaligned, invalid UTF-8 or empty files: one line, before Prefect's server starts."""
    config = write_config(tmp_path)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, data in files.items():
        (corpus / name).write_bytes(data)
    done = run_flow("--config", str(config), "--set", "data.source=folder", "--set", f"data.folder={corpus}",
                    cwd=tmp_path)
    assert_one_line_error(done, *expected)
    assert not (tmp_path / "run" / "runs").exists()


@pytest.mark.parametrize("args, expected", [
    (("--set", "tracking.log_every_steps=0"),
     "--set tracking.log_every_steps: TrackingConfig.log_every_steps=0: must be a positive integer"),
    (("--set", "input.shuffle_buffer=-1"),
     "--set input.shuffle_buffer: InputConfig.shuffle_buffer=-1: must be a positive integer"),
    (("--set", "tokenizer.num_threads=0"),
     "--set tokenizer.num_threads: TokenizerConfig.num_threads=0: must be a positive integer"),
    (("--set", "retention.keep_runs=0"), "--set retention.keep_runs: RetentionConfig.keep_runs=0: a positive number"),
    (("--train-steps", "0"), "--train-steps 0: must be a positive number of steps"),
])
def test_a_setting_out_of_range_exits_2_with_one_line_naming_it(tmp_path, args, expected):
    done = run_flow("--config", str(write_config(tmp_path)), *args, cwd=tmp_path)
    assert_one_line_error(done, expected)
    assert not (tmp_path / "run").exists()


def test_a_setting_given_twice_or_an_empty_config_exits_2_with_one_line(tmp_path):
    config = write_config(tmp_path)
    text = config.read_text()
    twice = tmp_path / "twice.yaml"
    twice.write_text(text + "train:\n  train_steps: 5\n")
    line = len(text.splitlines()) + 1
    first = next(i for i, row in enumerate(text.splitlines(), 1) if row.startswith("train:"))
    done = run_flow("--config", str(twice), cwd=tmp_path)
    assert_one_line_error(done, f"{twice}:{line}: train: given twice (first at line {first})")
    for content in ("", "# nothing but a comment\n\n"):
        empty = tmp_path / "empty.yaml"
        empty.write_text(content)
        assert_one_line_error(run_flow("--config", str(empty), cwd=tmp_path), f"{empty}: empty: no settings")
    assert not (tmp_path / "run").exists() and not (tmp_path / "runs").exists()


def tree_bytes(directory) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_a_run_dir_whose_tokenizer_has_other_settings_is_refused_and_left_as_it_was(tmp_path):
    """An earlier run's model is good only with its tokenizer: another vocabulary size in its run_dir
    is refused before anything starts, and the tokenizer's files stay byte for byte."""
    from pipelines.corpus import sha256_bytes
    from pipelines.tokenization import TokenizerConfig, recorded_settings

    config = write_config(tmp_path)
    tokenizer = tmp_path / "run" / "tokenizer"
    tokenizer.mkdir(parents=True)
    model = b"an earlier run's SentencePiece model"
    trained = recorded_settings(TokenizerConfig(vocab_size=1000, input_sentence_size=20000, verbatim=True))
    (tokenizer / "spm_shared.model").write_bytes(model)
    (tokenizer / "spm_shared.vocab").write_text("<pad>\t0\n")
    (tokenizer / "spm_shared.json").write_text(json.dumps(
        {"inputs": {"config": trained, "files": {"en": "a", "de": "b"}}, "model_sha256": sha256_bytes(model)}))
    before = tree_bytes(tmp_path / "run")
    done = run_flow("--config", str(config), "--set", "tokenizer.vocab_size=900", cwd=tmp_path)
    line = assert_one_line_error(
        done, f"{tokenizer / 'spm_shared.model'}: trained with other settings (vocab_size 1000, not 900), and the "
              "earlier runs of this directory depend on it: give this run another run_dir, or the tokenizer settings "
              "it was trained with")
    assert "seed" not in line  # only what differs
    assert tree_bytes(tmp_path / "run") == before


def test_debug_shows_the_traceback_of_a_user_error(tmp_path):
    config = write_config(tmp_path)
    done = run_flow("--config", str(config), "--set", "train.warmup_stepz=10", "--debug", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" in done.stderr
    assert done.stderr.rstrip().splitlines()[-1].startswith("python -m flows.translation: error: --set")


def test_help_answers(tmp_path):
    done = run_flow("--help", cwd=tmp_path)
    assert done.returncode == 0 and "--new-run" in done.stdout and "--debug" in done.stdout
    assert not done.stderr


@pytest.mark.parametrize("args", [("--help",), ("--set", "train.warmup_stepz=10")])
def test_help_and_a_settings_error_import_no_tensorflow_mlflow_or_prefect(tmp_path, args):
    """What makes them answer in about a second (not timed: a busy machine is slower, not wrong)."""
    done = run_flow(*args, cwd=tmp_path, env={"PYTHONPROFILEIMPORTTIME": "1"})
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    heavy = {name for name in imported if name.split(".")[0] in ("tensorflow", "keras", "mlflow", "prefect")}
    assert imported and not heavy, sorted(heavy)[:10]


#: What TensorFlow's libraries print at start-up whatever the log level (absl before InitializeLog).
TF_START_UP = re.compile(r"^([IWE]\d{4} [\d:.]+ +\d+ \S+:\d+\]|WARNING: All log messages before absl)", re.M)


def result_of(done: subprocess.CompletedProcess):
    """The result the command prints with ``--json``, read as the flow returned it."""
    from flows.results import RunResult

    assert done.returncode == 0, done.stderr[-4000:]
    return RunResult.from_dict(json.JSONDecoder().raw_decode(done.stdout)[0])


@pytest.mark.slow
def test_the_command_line_options_and_a_quiet_healthy_run(tmp_path, shared_api):
    """--train-steps, --set, --new-run and --run-id as a user types them; stderr of a healthy run
    holds no TensorFlow start-up lines. The runs a user reads start their own Prefect server, as a user's
    do; the others share one. Then another vocabulary size in the run_dir is refused, and the finished
    runs' tokenizer, corpus and run files stay byte for byte."""
    from mlflow.tracking import MlflowClient

    config = write_config(tmp_path, shared_data=False)  # its corpus under the run_dir, as a user's run has it
    common = ("--config", str(config), "--set", "export=false", "--set", "evaluation.max_sentences=4")
    first = run_flow(*common, "--train-steps", "10", "--json", cwd=tmp_path)
    result = result_of(first)
    assert not TF_START_UP.search(first.stderr), TF_START_UP.findall(first.stderr)
    assert "Traceback" not in first.stderr and "httpx" not in first.stderr
    assert "\r" not in first.stderr  # no progress bar redrawn into a log (stderr is not a terminal)
    assert "training reached step 10 (started at 0)" in first.stderr  # the log lines are there
    # Each validation once, in the training stage's words; figures, not dicts of floats.
    validations = re.findall(r"validation at step \d+:", first.stderr)
    assert validations and len(validations) == len(set(validations)), validations
    assert "{'" not in first.stderr and "evaluation: bleu " in first.stderr
    assert " INFO mlflow." not in first.stderr  # MLflow's own INFO lines ("Creating initial MLflow database...")
    assert (result.training.start_step, result.training.final_step) == (0, 10)
    state = json.loads((tmp_path / "run" / "mlflow_run.json").read_text())
    client = MlflowClient(state["tracking_uri"])
    params = client.get_run(result.run_id).data.params
    assert (params["train.train_steps"], params["train.checkpoint_every_steps"]) == ("10", "2")
    assert params["evaluation.max_sentences"] == "4" and params["export.enabled"] == "False"

    # --run-id: that run named and continued.
    named = result_of(run_flow(*common, "--train-steps", "12", "--run-id", result.run_id, "--json", cwd=tmp_path,
                               env=shared_api))
    assert named.run_id == result.run_id and (named.training.start_step, named.training.final_step) == (10, 12)
    # --new-run: a new MLflow run from step 0 (retention is no setting of the training's). Without --json a
    # reader gets a summary: the run, its steps, the scores and examples, no JSON. Keeping one run, it
    # retires the first one's checkpoints.
    summary = run_flow(*common, "--train-steps", "10", "--new-run", "--set", "retention.keep_runs=1", cwd=tmp_path)
    assert summary.returncode == 0, summary.stderr[-4000:]
    run_id = re.search(r"^MLflow run (\w+) \(translation\)", summary.stdout, re.M).group(1)
    assert "Trained from step 0 to 10" in summary.stdout and "Examples (test split):" in summary.stdout
    assert not summary.stdout.lstrip().startswith("{") and len(summary.stdout.splitlines()) < 40
    # Where to look next: the run's page in MLflow's UI, and Prefect's records of the flow run.
    assert f"#/experiments/1/runs/{run_id}?workflowType=machine_learning" in summary.stdout
    assert "`prefect server start` shows them" in summary.stdout
    assert run_id != result.run_id and client.get_run(run_id).info.status == "FINISHED"
    # Continuing the first run now says that it starts over.
    continued = run_flow(*common, "--train-steps", "12", "--run-id", result.run_id, "--json", cwd=tmp_path,
                         env=shared_api)
    assert result_of(continued).training.start_step == 0
    assert f"MLflow run {result.run_id} had its checkpoints removed by retention" in continued.stderr
    assert client.get_run(result.run_id).data.tags["retention.checkpoints_removed"] == "true"

    # An earlier run's model is good only with its tokenizer: other settings are refused before anything starts.
    run = tmp_path / "run"
    before = {name: tree_bytes(run / name) for name in ("tokenizer", "data", "runs")}
    assert all(before.values())
    done = run_flow(*common, "--train-steps", "4", "--set", "tokenizer.vocab_size=900", cwd=tmp_path)
    assert_one_line_error(done, "spm_shared.model: trained with other settings (vocab_size 1000, not 900)",
                          "give this run another run_dir")
    assert {name: tree_bytes(run / name) for name in before} == before
