"""The span parser: section 3.1's encoder under a span classifier, for section 6.3's task.

Everything that makes it a parser lives here: the model (:mod:`.model`), its training targets
from linearised trees (:mod:`.targets`) and tree CRF loss (:mod:`.tree_crf`, :mod:`.objective`), the
chart search that decodes a tree (:mod:`.chart`, :mod:`.chart_parser`) and its SavedModel export
(:mod:`.chart_export`). Callers ask the model, not its type, how it trains, decodes and exports.
"""

from keras_transformer.models.span_parser.model import SpanParser

__all__ = ["SpanParser"]
