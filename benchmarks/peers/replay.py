"""Run a command-line module with every training budget counted in steps: a replay of an idle machine.

A recipe's hour differs between machines by the updates it makes; replaying it as a step budget (each
optimizer step worth the seconds it took on an idle machine, :func:`pipelines.training.budget.replaying_steps`)
makes the same run whatever else this machine is doing, so a variant's hour can be compared with an
hour measured before::

    python -m benchmarks.peers.replay 0.12788 -m flows.translation --config configs/translation/cpu-small.yaml
"""

from __future__ import annotations

import runpy
import sys

from pipelines.training.budget import replaying_steps


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    usage = "usage: python -m benchmarks.peers.replay SECONDS_PER_STEP -m MODULE [ARGUMENT ...]"
    if len(argv) < 3 or argv[1] != "-m" or argv[0] in ("-h", "--help"):
        print(f"{usage}\n\n{__doc__.split(chr(10) * 2)[0]}", file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    try:
        seconds = float(argv[0])
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        print(f"{usage}\nseconds_per_step must be positive, got {argv[0]!r}", file=sys.stderr)
        return 2
    module, arguments = argv[2], argv[3:]
    sys.argv = [module, *arguments]
    with replaying_steps(seconds):
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as done:
            return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
