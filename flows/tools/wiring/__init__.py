"""The wiring checks of ``wiring-check``: one per task (:mod:`.translation`, :mod:`.parsing`), sharing
the arrays and the losses with and without the source (:mod:`.losses`)."""
