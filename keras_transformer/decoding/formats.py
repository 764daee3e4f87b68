"""What a model exports as, named where a config can check it without loading TensorFlow, and the names
every export shares: the SavedModel's serving signature and the metadata file a translator, a chart
parser and a CTranslate2 directory all carry (``"kind"`` tells them apart)."""

#: The SavedModel (TensorFlow: tokenization and beam search in one graph) or a CTranslate2 directory.
EXPORT_FORMATS = ("savedmodel", "ctranslate2")
#: The precisions of a CTranslate2 directory's weights (CTranslate2's ``quantization``).
QUANTIZATIONS = ("float32", "int8")

#: A SavedModel's serving signature, its input (a 1-D ``tf.string`` of sentences) and its output.
SIGNATURE_KEY = "serving_default"
INPUT_NAME = "sentences"
OUTPUT_NAME = "translations"
#: How an export decodes (its settings, tokenizers, model config), readable without loading its graph.
METADATA_FILE = "assets.extra/translator.json"
