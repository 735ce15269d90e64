"""SavedModel export: raw strings in, translations and scores out, everything in the graph.

Signatures:
  serving_default(inputs: tf.string [batch]) -> {outputs: tf.string [batch],
                                                 scores: float32 [batch],
                                                 errors: tf.string [batch]}
  translate_ids(inputs: int32 [batch, length]) -> {outputs: int32 [batch, length'], scores,
                                                   errors: tf.string [batch]}
  score, score_ids, sample, translate_constrained: see t2t_lite.export.signatures.
An input that cannot be encoded (invalid UTF-8, or not symbols; for translate_ids an id outside
the vocabulary, EOS, or padding before the end) gets the empty output, score 0 and its reason
in `errors` ("" for the others), so one bad item does not fail a batch.
The second takes and returns token ids without EOS, PAD(0)-padded, for servers without the
tokenizer's ops (a SentencePiece vocabulary needs `import tensorflow_text` before loading).
Versions are numbered subdirectories of the export directory, the layout TensorFlow Serving
watches (t2t_lite.export.versions).
"""

import tensorflow as tf

from t2t_lite.export.signatures import signatures
from t2t_lite.export.versions import new_version

SIGNATURES = ("serving_default", "translate_ids", "score", "score_ids", "sample",
              "translate_constrained")


def export(translator, export_dir):
    """Saves `translator` as a new SavedModel version in export_dir; returns the version's
    path."""
    return new_version(export_dir, lambda path: tf.saved_model.save(translator, path, signatures={
        "serving_default": translator.translate_strings,
        "translate_ids": translator.serve_ids,
        **signatures(translator),
    }))
