"""The NLTK Penn Treebank sample beside the repository (``../shared/data/nltk-treebank/treebank.zip``)."""

from pathlib import Path

import pytest

from pipelines.tasks.parsing.tree import Tree
from pipelines.tasks.parsing.treebank import load_splits

#: repo_root.parent / "shared": CI clones the repository with shared/ next to it.
SAMPLE_ZIP = Path(__file__).resolve().parents[4].parent / "shared" / "data" / "nltk-treebank" / "treebank.zip"


@pytest.fixture(scope="session")
def sample_zip() -> Path:
    if not SAMPLE_ZIP.is_file():
        pytest.skip(f"NLTK treebank sample {SAMPLE_ZIP} is absent (python -m nltk.downloader treebank)")
    return SAMPLE_ZIP


@pytest.fixture(scope="session")
def sample_splits(sample_zip) -> dict[str, list[Tree]]:
    return load_splits(sample_zip)


@pytest.fixture(scope="session")
def sample_trees(sample_splits) -> list[Tree]:
    return sample_splits["train"] + sample_splits["dev"] + sample_splits["test"]
