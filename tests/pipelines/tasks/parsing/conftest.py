"""Treebanks of the parsing tests: the suite's toy treebank, and the real NLTK sample for its specifics.

The machinery (reader, data stage, scorer, evaluation) is tested on the toy treebank that
``toy_treebank`` (tests/conftest.py) generates, so that it runs everywhere; the NLTK sample beside
the repository (``../shared/data/nltk-treebank/treebank.zip``, non-commercial licence, never copied
in) is read only by the tests of its own figures.
"""

from pathlib import Path

import pytest

from pipelines.tasks.parsing.tree import Tree
from pipelines.tasks.parsing.treebank import load_splits


@pytest.fixture(scope="session")
def toy_splits(toy_treebank) -> dict[str, list[Tree]]:
    return load_splits(toy_treebank)


@pytest.fixture(scope="session")
def toy_trees(toy_splits) -> list[Tree]:
    return toy_splits["train"] + toy_splits["dev"] + toy_splits["test"]


@pytest.fixture(scope="session")
def sample_zip(shared_data_dir) -> Path:
    """The sample in ``shared_data_dir`` (tests/conftest.py: CI has it beside the clone)."""
    path = shared_data_dir / "nltk-treebank" / "treebank.zip"
    if not path.is_file():
        pytest.fail(f"{path} is missing from the shared data folder")
    return path


@pytest.fixture(scope="session")
def sample_splits(sample_zip) -> dict[str, list[Tree]]:
    return load_splits(sample_zip)
