"""Before an hour is spent on a new model or recipe: does it learn a few dozen pairs back, and does it
need its source?

    wiring-check translation [--config CONFIG] [--set KEY=VALUE ...] [--optimizer recipe] [--output FILE]
    wiring-check parsing --treebank TREEBANK [--compare] [--model KEY=VALUE ...] [--output FILE]

``wiring-check TASK --help`` lists the task's options. The translation check is
:mod:`flows.tools.wiring.translation` (overfit to sacreBLEU >= 90, BLEU at most half without the
source), the parser's :mod:`flows.tools.wiring.parsing` (overfit to labelled F1 >= 95, the loss
clearly worse without the source).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

PROG = "wiring-check"


def _tasks() -> dict[str, Callable[[list[str]], int]]:
    # Imported on demand: --help of the command should not wait for either check's imports.
    from flows.tools.wiring import parsing, translation

    return {"translation": translation.main, "parsing": parsing.main}


TASKS = ("translation", "parsing")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in TASKS:
        # The task's own parser reads the rest, so that `wiring-check TASK --help` shows its options.
        return _tasks()[argv[0]](argv[1:], prog=f"{PROG} {argv[0]}")
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                     epilog="`wiring-check TASK --help` lists a task's options.")
    parser.add_argument("task", choices=TASKS, help="the task whose model (and recipe) is checked")
    parser.add_argument("options", nargs="*", help="the task's options")
    parser.parse_args(argv)  # exits: --help, or no task / an unknown one
    return 2


if __name__ == "__main__":
    sys.exit(main())
