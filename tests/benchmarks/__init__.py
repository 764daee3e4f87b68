"""Tests of the benchmarks (``benchmarks/``), one folder per group as there: ``peers``, ``speed``, ``probes``."""
