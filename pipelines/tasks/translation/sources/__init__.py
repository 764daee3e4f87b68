"""The translation task's data stage: fetch or read a parallel corpus, clean it, write the prepared layout.

Sources (``SourceConfig.source``), one module each, all producing the layout of :mod:`pipelines.corpus`:

* ``ddtp`` (default, no network; :mod:`.ddtp`): the En-De / En-Fr corpora bundled in
  ``pipelines/tasks/translation/corpora/ddtp`` (built from Debian's description translations by
  :mod:`pipelines.tasks.translation.ddtp`). With ``translations_dir`` (local ``Translation-<lang>``
  files) or ``mirror`` + ``suite`` (a Debian mirror) the corpus is rebuilt from the raw files instead.
* ``wmt14`` (:mod:`.wmt14`): the paper's WMT 2014 data (Section 5.1) through tensorflow-datasets
  (``wmt14_translate/de-en``, ``fr-en``); the download servers are probed with a short timeout
  first so that an offline machine fails at once with a clear message.
* ``folder`` (:mod:`.folder`): a user's parallel text files, named ``<name>.<split>.<lang>`` (e.g.
  ``news.train.en``), ``<split>.<lang>`` or, as ``tfds.TranslateFolder`` expects,
  ``<lang>.<split>.txt``. Splits ``train``, ``validation`` (or ``valid``/``dev``) and ``test``;
  a missing validation or test split is carved out of train by a hash of the source sentence.

Every split streams from its source through the cleaning (:mod:`pipelines.tasks.translation.cleaning`)
into its files, with counts per reason stored in the manifest (:mod:`.stage`), so memory does not
grow with the corpus. A rerun with the same settings whose output verifies against its manifest does
no work; a corpus prepared with other settings is refused, not rewritten (:mod:`pipelines.prepared`).
``python -m pipelines.tasks.translation.sources CONFIG.yaml`` runs the stage.
"""

from pipelines.tasks.translation.sources.config import SOURCES, RawSplits, SourceConfig
from pipelines.tasks.translation.sources.stage import prepare_corpus

__all__ = ["SOURCES", "RawSplits", "SourceConfig", "prepare_corpus"]
