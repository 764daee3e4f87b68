"""Our models against their peers: keras-hub's Transformer (learning, training speed, decoding, the
hour), SuPar and a PCFG (parsing), with the files the peers read."""
