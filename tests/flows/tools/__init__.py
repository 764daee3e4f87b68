"""Tests of the commands in ``flows/tools/``: choose-alpha, compare-runs, compare-decodings,
wiring-check, recipe-search."""
