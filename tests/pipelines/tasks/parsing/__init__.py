"""Tests of the constituency-parsing task (pipelines/tasks/parsing)."""
