"""Tests of the tasks beyond translation (pipelines/tasks)."""
