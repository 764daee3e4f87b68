"""Tests of ``benchmarks/probes/``."""
