"""``parse-eval`` (pipelines/tasks/parsing/evalb_cli.py): JSON equal to the library, report, bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.tasks.parsing.evalb import score_trees
from pipelines.tasks.parsing.evalb_cli import main
from pipelines.tasks.parsing.linearize import linearize, repair
from pipelines.tasks.parsing.tree import parse_tree

REPO_ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def tree_files(tmp_path_factory, toy_splits):
    """Gold test split and a damaged copy (brackets dropped, one word changed, one failed parse)."""
    gold = toy_splits["test"]
    test = []
    for number, tree in enumerate(gold):
        tokens = linearize(tree).split()
        if number % 3 == 0:
            tokens = [token for token in tokens if not token.startswith(")")]
        elif number % 3 == 1:
            tokens = [token for index, token in enumerate(tokens) if not (token.startswith("(") and index % 2)]
        test.append(repair(tokens, tree.words()).to_string())
    test[5] = test[5].replace(f" {gold[5].words()[0]})", " CHANGED)", 1)
    test[7] = ""
    folder = tmp_path_factory.mktemp("parse-eval")
    (folder / "gold.txt").write_text("".join(tree.to_string() + "\n" for tree in gold))
    (folder / "test.txt").write_text("\n".join(test) + "\n")
    return folder / "gold.txt", folder / "test.txt"


def _library(gold_path: Path, test_path: Path) -> dict:
    gold = [parse_tree(line, normalize=False) for line in gold_path.read_text().splitlines()]
    test = [parse_tree(line, normalize=False) if line else None for line in test_path.read_text().splitlines()]
    return score_trees(gold, test)


def test_json_in_process_equals_library(tree_files, capsys):
    assert main([str(tree_files[0]), str(tree_files[1]), "--json"]) == 0
    output = json.loads(capsys.readouterr().out)
    expected = _library(*tree_files)
    assert output == expected
    assert set(output) == {"per_sentence", "all", "len<=40"}
    assert output["all"]["error_sentences"] == 1 and output["all"]["skip_sentences"] == 1
    assert 0 < output["all"]["fmeasure"] < 100


def test_json_subprocess_equals_library(tree_files):
    completed = subprocess.run(
        [sys.executable, "-m", "pipelines.tasks.parsing.evalb_cli", str(tree_files[0]), str(tree_files[1]), "--json"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == _library(*tree_files)
    assert "sentence 6: Words unmatch" in completed.stderr


def test_report(tree_files, capsys):
    assert main([str(tree_files[0]), str(tree_files[1])]) == 0
    report = capsys.readouterr().out.splitlines()
    result = _library(*tree_files)
    assert report[1].startswith(" ID  Len.  Stat. Recal  Prec.")
    first = result["per_sentence"][0]
    assert report[3].split() == [str(first["id"]), str(first["length"]), "0", f"{first['recall']:.2f}",
                                 f"{first['precision']:.2f}", str(first["matched"]), str(first["gold_brackets"]),
                                 str(first["test_brackets"]), str(first["crossing"]), str(first["words"]),
                                 str(first["correct_tags"]), f"{first['tagging_accuracy']:.2f}"]
    assert report[3 + 7].split()[2] == "2" and report[3 + 5].split()[2] == "1"
    assert "-- All --" in report and "-- len<=40 --" in report
    assert f"Bracketing FMeasure       = {result['all']['fmeasure']:6.2f}" in report
    assert f"Number of Valid sentence  = {result['len<=40']['valid_sentences']:6d}" in report


def test_bad_input_exits_2(tmp_path, tree_files, capsys):
    gold, test = map(str, tree_files)
    assert main([str(tmp_path / "missing.txt"), test, "--json"]) == 2
    assert f"cannot read {tmp_path / 'missing.txt'}" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"
    bad.write_text("(TOP (S (NN a)))\n(TOP (S (NN a))\n")
    assert main([gold, str(bad)]) == 2
    assert f"{bad}, line 2: unbalanced brackets" in capsys.readouterr().err
    short = tmp_path / "short.txt"
    short.write_text("(TOP (S (NN a)))\n")
    assert main([gold, str(short)]) == 2
    assert f"{gold} has 60 lines but {short} has 1" in capsys.readouterr().err
    blank = tmp_path / "blank.txt"
    blank.write_text("(TOP (S (NN a)))\n\n")
    assert main([str(blank), str(blank)]) == 2
    assert f"{blank}, line 2: blank line" in capsys.readouterr().err
    completed = subprocess.run([sys.executable, "-m", "pipelines.tasks.parsing.evalb_cli", gold, str(bad)],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 2 and f"{bad}, line 2" in completed.stderr and not completed.stdout


def test_files_without_trees_or_not_utf8_exit_2_in_one_line(tmp_path, tree_files, capsys):
    gold = str(tree_files[0])
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert main([str(empty), str(empty)]) == 2
    assert capsys.readouterr().err == f"parse-eval: error: no trees in {empty}\n"
    assert main([gold, str(empty)]) == 2
    assert capsys.readouterr().err == f"parse-eval: error: no trees in {empty}\n"
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"(TOP (S (NN a)))\n(TOP (S (NN caf\xe9)))\n")
    assert main([str(latin1), str(latin1)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"parse-eval: error: {latin1}:2: invalid UTF-8 at byte 15\n" and not captured.out


def test_debug_shows_the_traceback_before_the_line(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    command = [sys.executable, "-m", "pipelines.tasks.parsing.evalb_cli", str(empty), str(empty)]
    quiet = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert quiet.returncode == 2 and quiet.stderr == f"parse-eval: error: no trees in {empty}\n"
    loud = subprocess.run([*command, "--debug"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert loud.returncode == 2 and "Traceback" in loud.stderr and "InputError" in loud.stderr
    assert loud.stderr.endswith(quiet.stderr)
