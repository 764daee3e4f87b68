"""``compare-decodings`` (flows/tools/compare_decodings.py): sacreBLEU's paired test on hand-made translations."""

from __future__ import annotations

import json

import pytest

from flows.tools import compare_decodings

paired_test = compare_decodings.paired_test

REFERENCES = ["Die Katze sitzt auf der Matte.", "Ein Hund rennt im Park.", "Es regnet heute sehr stark."] * 20
WORSE = ["Die Katze sitzt auf Matte.", "Ein Hund im Park.", "Es regnet heute stark."] * 20


def test_a_better_system_on_every_sentence_is_significant_and_an_equal_one_is_not():
    better = paired_test(REFERENCES, WORSE, REFERENCES, trials=500)
    assert better["bleu"]["system"] == 100.0 and better["bleu"]["difference"] > 0
    assert better["bleu"]["p_value"] < 0.01 and better["chrf"]["p_value"] < 0.01
    # One sentence better out of 60: no evidence.
    one = WORSE[:-1] + REFERENCES[-1:]
    slight = paired_test(REFERENCES, WORSE, one, trials=500)
    assert 0 < slight["bleu"]["difference"] and slight["bleu"]["p_value"] > 0.05
    assert paired_test(REFERENCES, WORSE, WORSE, trials=200)["bleu"]["difference"] == 0


def test_files_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="as many lines"):
        paired_test(REFERENCES, WORSE[:-1], WORSE)


def test_compare_decodings_reads_three_files_and_writes_its_report(tmp_path, capsys):
    files = {}
    for name, lines in (("references", REFERENCES), ("baseline", WORSE), ("system", REFERENCES)):
        files[name] = tmp_path / f"{name}.txt"
        files[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert compare_decodings.main([*map(str, files.values()), "--trials", "200",
                                   "--output", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert json.loads(capsys.readouterr().out) == report
    assert report["sentences"] == 60 and report["system_file"] == str(files["system"])
    assert report["bleu"]["p_value"] < 0.01 and report["bleu"]["system"] == 100.0


def test_files_of_different_lengths_stop_the_command(tmp_path, capsys):
    (tmp_path / "r.txt").write_text("a\nb\n", encoding="utf-8")
    (tmp_path / "h.txt").write_text("a\n", encoding="utf-8")
    with pytest.raises(SystemExit) as stopped:
        compare_decodings.main([str(tmp_path / "r.txt"), str(tmp_path / "h.txt"), str(tmp_path / "h.txt")])
    assert stopped.value.code == 2 and "as many lines" in capsys.readouterr().err

