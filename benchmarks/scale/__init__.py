"""Benchmarks of the product at the paper's data size, by simulation: ``data_stages``."""
