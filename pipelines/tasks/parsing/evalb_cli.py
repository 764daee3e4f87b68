"""``parse-eval``: score parses against gold trees like ``evalb -p COLLINS.prm`` (paper section 6.3).

Usage::

    parse-eval gold.trees test.trees            # EVALB-style report
    parse-eval gold.trees test.trees --json     # {"per_sentence": [...], "all": {...}, "len<=40": {...}}
    python -m pipelines.tasks.parsing.evalb_cli gold.trees test.trees

Each file holds one bracketed tree per line, read as written (EVALB trims function tags and
removes ``TOP``, ``-NONE-`` and punctuation itself; see `evalb`). A blank test line is a failed
parse: the sentence is skipped, as EVALB skips an empty line. A missing or unreadable file, a
line that is not UTF-8, a malformed tree, a blank gold line, files of different line counts or
without a tree exit with status 2 and one line naming the file (and line); ``--debug`` logs the
traceback too.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from pipelines.cli_errors import InputError, add_debug_option, run_command, utf8_lines

from .evalb import CUTOFF_LEN, score_trees
from .tree import Tree, TreebankError, parse_tree


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="parse-eval",
        description="Labelled bracket recall, precision and F1 like EVALB with COLLINS.prm "
                    "(one bracketed tree per line in each file).",
    )
    parser.add_argument("gold", help="gold trees, one per line")
    parser.add_argument("test", help="parser output, one tree per line (blank line: no parse)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    parser.add_argument("--cutoff-len", type=int, default=CUTOFF_LEN,
                        help=f"length limit of the second summary section (default {CUTOFF_LEN})")
    add_debug_option(parser)
    return parser


def read_tree_lines(path: str, *, blank_ok: bool) -> list[Tree | None]:
    """One tree per line of ``path`` (``None`` for a blank line when ``blank_ok``)."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise InputError(f"cannot read {path}: {error}") from error
    trees: list[Tree | None] = []
    for number, line in enumerate(utf8_lines(data.splitlines(), path), start=1):
        if not line.strip():
            if not blank_ok:
                raise InputError(f"{path}, line {number}: blank line where a gold tree is expected")
            trees.append(None)
            continue
        try:
            trees.append(parse_tree(line, normalize=False, source=path, line=number))
        except TreebankError as error:
            raise InputError(str(error)) from error
    return trees


def _sentence_line(r: dict) -> str:
    return (f"{r['id']:4d}  {r['length']:3d}    {r['status']}  {r['recall']:6.2f} {r['precision']:6.2f}   "
            f"{r['matched']:3d}    {r['gold_brackets']:3d}  {r['test_brackets']:3d}    {r['crossing']:3d}   "
            f"{r['words']:4d}  {r['correct_tags']:4d}   {r['tagging_accuracy']:6.2f}")


def _section(title: str, s: dict) -> list[str]:
    rows = [
        ("Number of sentence", f"{s['sentences']:6d}"),
        ("Number of Error sentence", f"{s['error_sentences']:6d}"),
        ("Number of Skip  sentence", f"{s['skip_sentences']:6d}"),
        ("Number of Valid sentence", f"{s['valid_sentences']:6d}"),
        ("Bracketing Recall", f"{s['recall']:6.2f}"),
        ("Bracketing Precision", f"{s['precision']:6.2f}"),
        ("Bracketing FMeasure", f"{s['fmeasure']:6.2f}"),
        ("Complete match", f"{s['complete_match']:6.2f}"),
        ("Average crossing", f"{s['average_crossing']:6.2f}"),
        ("No crossing", f"{s['no_crossing']:6.2f}"),
        ("2 or less crossing", f"{s['two_or_less_crossing']:6.2f}"),
        ("Tagging accuracy", f"{s['tagging_accuracy']:6.2f}"),
    ]
    return ["", f"-- {title} --", *(f"{name:<26}= {value}" for name, value in rows)]


def format_report(result: dict, cutoff_len: int = CUTOFF_LEN) -> str:
    """The report in evalb.c's layout (``print_head``, ``individual_result``, ``print_total``)."""
    rule = "=" * 76
    lines = [
        "  Sent.                        Matched  Bracket   Cross        Correct Tag",
        " ID  Len.  Stat. Recal  Prec.  Bracket gold test Bracket Words  Tags Accracy",
        rule,
        *(_sentence_line(record) for record in result["per_sentence"]),
        rule,
    ]
    total = result["all"]
    lines.append(f"                {total['recall']:6.2f} {total['precision']:6.2f} {total['matched']:6d} "
                 f"{total['gold_brackets']:5d} {total['test_brackets']:5d}  {total['crossing']:5d}"
                 f"  {total['words']:5d} {total['correct_tags']:5d}   {total['tagging_accuracy']:6.2f}")
    lines.append("=== Summary ===")
    lines += _section("All", total)
    lines += _section(f"len<={cutoff_len}", result[f"len<={cutoff_len}"])
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``parse-eval``; returns the exit status (2 for bad input)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="parse-eval: %(message)s", stream=sys.stderr)
    return run_command("parse-eval", lambda: evaluate(args), args.debug)


def evaluate(args) -> int:
    gold = read_tree_lines(args.gold, blank_ok=False)
    test = read_tree_lines(args.test, blank_ok=True)
    for path, trees in ((args.gold, gold), (args.test, test)):
        # Nothing to score: an F-measure of 0.00 would pass for a result. (A test file of blank
        # lines is one, every parse failed, and is scored.)
        if not trees:
            raise InputError(f"no trees in {path}")
    if len(gold) != len(test):
        raise InputError(f"{args.gold} has {len(gold)} lines but {args.test} has {len(test)}: "
                         "one tree per line is expected in both")
    result = score_trees(gold, test, cutoff_len=args.cutoff_len)
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        sys.stdout.write(format_report(result, args.cutoff_len))
    return 0

if __name__ == "__main__":
    sys.exit(main())
