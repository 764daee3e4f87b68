"""The paper's tasks on the shared engine: ``translation`` and ``parsing`` (section 6.3).

Each implements :class:`pipelines.tasks.base.Task` (prepare data -> corpus, evaluate -> metrics);
a third task would do the same and get vocabularies, training, averaging, beam search, export,
tracking and the registry from the engine and ``flows/pipeline.py``.
"""
