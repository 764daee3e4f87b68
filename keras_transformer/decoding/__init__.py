"""Cached greedy and beam search (section 6.1), the bracket constraint of the parser (section 6.3),
the Translator over raw strings and its SavedModel export."""
