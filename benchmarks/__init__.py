"""Benchmarks and probes: the measurements behind the README's figures, run as modules from the checkout.

    python -m benchmarks.<group>.<module> --help

``peers``: our models against the peers they are compared with (keras-hub, SuPar, a PCFG);
``speed``: timings of one part at a time; ``probes``: what a finished run or a model does, looked at
closely. The reports go to ``benchmarks/results/`` (``--output``), the recipe search files are in
``benchmarks/search/``. The tools a user runs (``choose-alpha``, ``compare-runs``, ``compare-decodings``,
``wiring-check``, ``recipe-search``) are commands of the package, in :mod:`flows.tools`.
"""

from __future__ import annotations

from pathlib import Path

#: The checkout: configs, runs and the peers' commands are found from it.
ROOT = Path(__file__).resolve().parents[1]
