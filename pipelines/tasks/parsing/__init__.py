"""English constituency parsing (paper section 6.3): Penn Treebank reader, tree linearisation, EVALB scorer."""
