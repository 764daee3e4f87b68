"""The NLTK Penn Treebank sample beside the repository (``../shared/data/nltk-treebank/treebank.zip``)."""

from pathlib import Path

import pytest

from pipelines.tasks.parsing.tree import Tree
from pipelines.tasks.parsing.treebank import load_splits


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


@pytest.fixture(scope="session")
def sample_trees(sample_splits) -> list[Tree]:
    return sample_splits["train"] + sample_splits["dev"] + sample_splits["test"]
