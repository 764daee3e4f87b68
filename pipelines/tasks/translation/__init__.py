"""Translation (paper sections 5-6.2): parallel corpora in (``sources``: bundled Debian DDTP,
WMT14, folders; ``cleaning``), BLEU and chrF out (``evaluation``); ``task.TranslationTask`` is
what the shared pipeline runs. Also the ``translate`` command and attention plots."""
