"""What a translation model exports as, named where a config can check it without loading TensorFlow."""

#: The SavedModel (TensorFlow: tokenization and beam search in one graph) or a CTranslate2 directory.
EXPORT_FORMATS = ("savedmodel", "ctranslate2")
#: The precisions of a CTranslate2 directory's weights (CTranslate2's ``quantization``).
QUANTIZATIONS = ("float32", "int8")
