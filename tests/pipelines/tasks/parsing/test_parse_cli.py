"""``parse``'s tokenizer (pipelines/tasks/parsing/parse_cli.py): raw text becomes the treebank's tokens.

The command itself, on a trained model and its export, is run by tests/flows/test_parsing_flow.py.
"""

import pytest

from pipelines.tasks.parsing.parse_cli import ptb_tokenize


@pytest.mark.parametrize(("text", "tokens"), [
    # Clitics are split off the way the treebank writes them.
    ("It isn't cheap, he said.", ["It", "is", "n't", "cheap", ",", "he", "said", "."]),
    ("They'll pay; we've paid and I'd pay, but you're late.",
     ["They", "'ll", "pay", ";", "we", "'ve", "paid", "and", "I", "'d", "pay", ",", "but", "you", "'re", "late", "."]),
    ("Mr. Thomas's nomination can't wait.", ["Mr.", "Thomas", "'s", "nomination", "ca", "n't", "wait", "."]),
    ("the analysts' estimates", ["the", "analysts", "'", "estimates"]),
    # Double quotes become the opening and closing quote tokens.
    ('He called it "well qualified."', ["He", "called", "it", "``", "well", "qualified", ".", "''"]),
    ('"No," she said.', ["``", "No", ",", "''", "she", "said", "."]),
    # Brackets take their treebank names.
    ("INTER-TEL Inc. (Chandler, Ariz.) rose.",
     ["INTER-TEL", "Inc.", "-LRB-", "Chandler", ",", "Ariz.", "-RRB-", "rose", "."]),
    ("judgment {and} respect [sic]", ["judgment", "-LCB-", "and", "-RCB-", "respect", "-LSB-", "sic", "-RSB-"]),
    # Only the sentence's final period is split off: abbreviations inside keep theirs.
    ("Ms. Haag plays Elianti.", ["Ms.", "Haag", "plays", "Elianti", "."]),
    ("Prices in Washington, D.C., rose.", ["Prices", "in", "Washington", ",", "D.C.", ",", "rose", "."]),
    ("Shares rose?", ["Shares", "rose", "?"]),
    # Currency and percentages; numbers with commas and decimals stay whole.
    ("Sales rose 10% to $1,100.50 million.", ["Sales", "rose", "10", "%", "to", "$", "1,100.50", "million", "."]),
    ("", []),
])
def test_raw_text_becomes_treebank_tokens(text, tokens):
    assert ptb_tokenize(text) == tokens
