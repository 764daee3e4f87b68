"""Timings of one part at a time: cores, decoding, the Adam update, matmul and training precision,
the parser's beam."""
