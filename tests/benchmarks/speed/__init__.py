"""Tests of ``benchmarks/speed/``."""
