"""The exported parser's in-graph twin of the parsing vocabulary: sentences are tokenized by the
SentencePiece twin, outputs decoded to symbols, and constrained outputs built into Penn-bracket
trees over the sentence's words (ParsingProblem.postprocess in-graph)."""

import tensorflow as tf

from t2t_lite.backends.tensorflow.vocabulary import InGraphVocabulary, tf_strip_mask
from t2t_lite.problems.tree_vocabulary import CLOSE, OPEN, OTHER, TAG
from t2t_lite.problems.trees import FILLER_TAG, ROOT


class InGraphTrees(InGraphVocabulary):
    """ParsingVocabulary's twin: `words` is its SentencePiece twin; ids from `offset` on are the
    `symbols`, of the `kinds` (per id) TAG, OPEN and CLOSE."""

    encodes_targets = False  # encode() reads sentences; a linearized tree is not one

    def __init__(self, words, symbols, kinds, offset):
        super().__init__()
        self.words = words
        self.offset = offset
        self.symbol_table = tf.constant(symbols or [""])
        self.kind_table = tf.constant(kinds)

    def encode(self, texts):
        return self.words.encode(texts)

    def errors(self, texts):
        return self.words.errors(texts)

    def decode(self, ids):
        """The symbols of a constrained search's outputs (which hold no subwords)."""
        kept = tf.ragged.boolean_mask(ids, tf_strip_mask(ids))
        symbols = tf.gather(self.symbol_table, tf.maximum(kept - self.offset, 0))
        return tf.strings.reduce_join(symbols, axis=-1, separator=" ")

    def trees(self, sources, ids):
        """In-graph twin of ParsingProblem.postprocess for constrained outputs: sentences
        tf.string [batch] and output ids [batch, length] -> Penn-bracket trees tf.string [batch]
        (empty for an empty sentence)."""
        kept = tf_strip_mask(ids)
        kinds = tf.where(kept, tf.gather(self.kind_table, ids), OTHER)
        symbols = tf.gather(self.symbol_table, tf.maximum(ids - self.offset, 0))
        words = tf.strings.split(sources)
        num_words = tf.cast(words.row_lengths(), tf.int32)
        padded_words = tf.pad(words.to_tensor(""), [[0, 0], [0, 1]])
        is_tag = kinds == TAG
        word_index = tf.math.cumsum(tf.cast(is_tag, tf.int32), axis=1) - 1
        has_word = is_tag & (word_index < num_words[:, None])
        word = tf.gather(padded_words, tf.clip_by_value(
            word_index, 0, tf.shape(padded_words)[1] - 1), batch_dims=1)
        pieces = tf.where(kinds == OPEN, " (" + symbols, "")
        pieces = tf.where(has_word, " (" + symbols + " " + word + ")", pieces)
        pieces = tf.where(kinds == CLOSE, ")", pieces)
        num_tags = tf.reduce_sum(tf.cast(has_word, tf.int32), axis=1)
        positions = tf.range(tf.shape(padded_words)[1])[None, :]
        untagged = (positions >= num_tags[:, None]) & (positions < num_words[:, None])
        extras = tf.where(untagged, f" ({FILLER_TAG} " + padded_words + ")", "")
        trees = (f"({ROOT}" + tf.strings.reduce_join(pieces, axis=1)
                 + tf.strings.reduce_join(extras, axis=1) + ")")
        return tf.where(num_words > 0, trees, "")
