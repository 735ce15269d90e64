"""The in-graph twins of the vocabularies (t2t_lite.data.vocabulary), for the exported model:
tf.string sentences -> ids, ids -> tf.string, and why an input cannot be encoded, item by item.
TensorFlow (and tensorflow-text for SentencePiece) only here."""

import hashlib

import tensorflow as tf
import tensorflow_text
from tensorflow_text.python.ops import sentencepiece_tokenizer as tf_text_sentencepiece

from t2t_lite.config import EOS_ID, PAD_ID


def tf_strip_mask(ids):
    """In-graph twin of vocabulary.strip_ids: True where an id is before the first EOS and not
    padding."""
    before_eos = tf.math.cumsum(tf.cast(ids == EOS_ID, tf.int32), axis=-1) == 0
    return before_eos & (ids != PAD_ID)


class InGraphVocabulary(tf.Module):
    """A tf.Module, so that an exported model holding it also saves the TensorFlow resources its
    tokenizer keeps as attributes. `encodes_targets`: whether encode() encodes target text too
    (not a parser's trees), so that the exported model can score strings."""

    encodes_targets = True

    def encode(self, texts):
        """tf.string [batch] -> tf.RaggedTensor int32 [batch, None]."""
        raise NotImplementedError

    def errors(self, texts):
        """tf.string [batch] -> tf.string [batch]: why each text cannot be encoded ("" when it
        can), so that the exported model rejects the items Vocabulary.encode would, one by
        one."""
        replaced = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace")
        return tf.where(replaced == texts, "", "not valid UTF-8")

    def decode(self, ids):
        """int32 [batch, length] -> tf.string [batch], stopping at EOS."""
        raise NotImplementedError


class InGraphSymbols(InGraphVocabulary):
    """SymbolVocabulary's twin: symbol s is id s + 2."""

    def __init__(self, num_symbols):
        super().__init__()
        self.num_symbols = num_symbols

    def encode(self, texts):
        tokens = tf.strings.split(texts)
        return tf.strings.to_number(tokens, tf.int32) + 2

    def errors(self, texts):
        tokens = tf.strings.split(texts)
        is_number = tf.strings.regex_full_match(tokens.flat_values, "[0-9]{1,9}")
        numbers = tf.strings.to_number(tf.where(is_number, tokens.flat_values, "0"), tf.int64)
        known = tokens.with_flat_values(is_number & (numbers < self.num_symbols))
        errors = tf.where(tf.reduce_all(known, axis=1), "",
                          f"expected integers 0..{self.num_symbols - 1} separated by spaces")
        utf8_errors = super().errors(texts)
        return tf.where(utf8_errors == "", errors, utf8_errors)

    def decode(self, ids):
        symbols = tf.ragged.boolean_mask(ids, tf_strip_mask(ids)) - 2
        return tf.strings.reduce_join(tf.strings.as_string(symbols), axis=-1, separator=" ")


class InGraphSentencePiece(InGraphVocabulary):
    """SentencePieceVocabulary's twin: tf_text's tokenizer of the same serialized model."""

    def __init__(self, model):
        super().__init__()
        self.tokenizer = tensorflow_text.SentencepieceTokenizer(model=model, out_type=tf.int32)
        self.tokenizer._model_resource = _SharedModelResource(
            model, "sentencepiece_" + hashlib.sha256(model).hexdigest()[:16])

    def encode(self, texts):
        return self.tokenizer.tokenize(texts)

    def decode(self, ids):
        return self.tokenizer.detokenize(tf.ragged.boolean_mask(ids, tf_strip_mask(ids)))


class _SharedModelResource(tf_text_sentencepiece._SentencepieceModelResource):
    """tf_text's model resource, registered under a name derived from the model.

    tf_text's own is owned by an eager kernel, so tf.random.set_seed (which clears the kernel
    cache) destroys it and every later tokenization fails (tensorflow/text#570); a named
    resource outlives the kernel.
    """

    def _create_resource(self):
        return tf_text_sentencepiece.gen_sentencepiece_tokenizer.sentencepiece_op(
            model=self._model, shared_name=self._name)
