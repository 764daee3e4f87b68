"""Tests of ``benchmarks/peers/``."""
