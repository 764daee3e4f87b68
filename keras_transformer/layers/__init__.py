"""The paper's layers (section 3): attention, embeddings, positional encodings, the feed-forward
and residual sublayers, encoder and decoder layers, and the parser's word alignment."""
