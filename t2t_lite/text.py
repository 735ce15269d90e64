"""Vocabularies: text <-> ids in Python and in-graph, with the framework's fixed special ids."""

import numpy as np
import tensorflow as tf

from t2t_lite.errors import UserError

PAD_ID = 0  # also the decoder's start symbol, as in tensor2tensor
EOS_ID = 1


def strip_ids(ids):
    """The ids before the first EOS, without padding."""
    ids = np.asarray(ids).tolist()
    if EOS_ID in ids:
        ids = ids[: ids.index(EOS_ID)]
    return [i for i in ids if i != PAD_ID]


def tf_strip_mask(ids):
    """In-graph twin of strip_ids: True where an id is before the first EOS and not padding."""
    before_eos = tf.math.cumsum(tf.cast(ids == EOS_ID, tf.int32), axis=-1) == 0
    return before_eos & (ids != PAD_ID)


class Vocabulary(tf.Module):
    """Text <-> ids without EOS (the Problem appends it); PAD=0 and EOS=1 are never produced.

    A tf.Module, so that an exported model holding it also saves the TensorFlow resources its
    in-graph tokenizer keeps as attributes.
    """

    size = None

    def encode(self, text):
        raise NotImplementedError

    def decode(self, ids):
        """Text of `ids` up to the first EOS, padding ignored."""
        raise NotImplementedError

    def tf_encode(self, texts):
        """tf.string [batch] -> tf.RaggedTensor int32 [batch, None], for the exported model."""
        raise NotImplementedError

    def tf_decode(self, ids):
        """int32 [batch, length] -> tf.string [batch], stopping at EOS, for the exported model."""
        raise NotImplementedError


class SymbolVocabulary(Vocabulary):
    """Space-separated integer symbols 0..n-1, as in tensor2tensor's algorithmic problems.

    Symbol s has id s + 2, after PAD and EOS.
    """

    def __init__(self, num_symbols):
        super().__init__()
        self.num_symbols = num_symbols
        self.size = num_symbols + 2

    def encode(self, text):
        ids = []
        for token in text.split():
            if not token.isdigit() or int(token) >= self.num_symbols:
                raise UserError(f"'{token}' is not a symbol of this problem: expected integers "
                                f"0..{self.num_symbols - 1} separated by spaces")
            ids.append(int(token) + 2)
        return ids

    def decode(self, ids):
        return " ".join(str(i - 2) for i in strip_ids(ids))

    def tf_encode(self, texts):
        tokens = tf.strings.split(texts)
        return tf.strings.to_number(tokens, tf.int32) + 2

    def tf_decode(self, ids):
        symbols = tf.ragged.boolean_mask(ids, tf_strip_mask(ids)) - 2
        return tf.strings.reduce_join(tf.strings.as_string(symbols), axis=-1, separator=" ")
