"""The tools a user runs beside the flows, each a command of the package (``--help`` on each):

``choose-alpha`` (:mod:`flows.tools.choose_alpha`), ``compare-runs`` (:mod:`flows.tools.compare_runs`),
``compare-decodings`` (:mod:`flows.tools.compare_decodings`), ``wiring-check``
(:mod:`flows.tools.wiring_check`) and ``recipe-search`` (:mod:`flows.tools.recipe_search`). Each prints
one JSON report and writes a copy where ``--output`` says (:mod:`flows.tools.report`); the committed
reports are in ``benchmarks/results/``.
"""

from __future__ import annotations

from pathlib import Path

#: The checkout: default configs are found from it, and a run under it is named relative to it.
REPO = Path(__file__).resolve().parents[2]
