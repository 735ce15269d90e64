"""The search constraint that makes every decoded output of a parsing model a well-formed tree,
in keras.ops (see t2t_lite.decoding.search); apart from the vocabulary, which reading and
writing trees needs without Keras."""

from keras import ops

from t2t_lite.config import EOS_ID
from t2t_lite.problems.tree_vocabulary import CLOSE, OPEN, TAG


class TreeConstraint:
    """The decoding constraint (see t2t_lite.decoding.search) that allows only well-formed trees
    with one tag per source word: a closer only for the innermost open constituent once it holds a
    word, a tag or label only while words remain, EOS only when every constituent is closed and
    every word tagged, and nothing that could not be completed within the length limit.

    With the vocabulary's tag dictionary (problems.tag_dictionary), a word's tag is also one
    the dictionary allows for it. With its nesting limits (the training trees' largest), a
    constituent opens only while fewer are open than max_depth and fewer than
    max_opens_in_a_row were opened since the last tag: a half-trained model otherwise fills its
    length limit with chains like (VP (VP (VP ..., which cost precision and time.

    State per hypothesis: words to tag, tags so far, open depth, a stack of the open
    constituents' labels and tag counts at opening, and each source word's dictionary row.
    """

    def __init__(self, vocabulary):
        self.kinds = vocabulary.kinds
        self.label_of = vocabulary.label_of
        self.word_starts = vocabulary.word_starts.astype("int32")
        self.dictionary = getattr(vocabulary, "tag_dictionary", None)
        self.tag_column = getattr(vocabulary, "tag_column", None)
        self.max_depth = getattr(vocabulary, "max_depth", None)
        self.max_opens_in_a_row = getattr(vocabulary, "max_opens_in_a_row", None)

    def start(self, inputs, max_length):
        rows = ops.shape(inputs)[0]
        starts = ops.take(ops.convert_to_tensor(self.word_starts), inputs)
        words = ops.sum(starts, axis=1)
        zeros = ops.zeros((rows,), "int32")
        stack = ops.zeros((rows, max_length + 1), "int32")
        if self.dictionary is None:
            return words, zeros, zeros, stack, stack, ops.zeros((rows, 1), "int32")
        return words, zeros, zeros, stack, stack, self._dictionary_rows(inputs, starts)

    def _dictionary_rows(self, inputs, starts):
        """int32 [rows, S]: the dictionary row of the source's k-th word at k (the unknown
        word's row where no training word has its key; see problems.tag_dictionary)."""
        length = ops.shape(inputs)[1]
        word_index = ops.cumsum(starts, axis=1) - 1  # -1 before the first word
        in_word = ops.cast(word_index[:, :, None] == ops.arange(length)[None, None, :], "int32")
        keys = 0
        for half in (0, 1):  # per word: the sum of its pieces' codes, below 2**31
            codes = ops.take(ops.convert_to_tensor(self.dictionary.codes[half]), inputs)
            keys = keys * 2**15 + ops.mod(ops.sum(codes[:, :, None] * in_word, axis=1), 2**15)
        known = ops.convert_to_tensor(self.dictionary.keys)
        flat = ops.reshape(keys, (-1,))
        at = ops.cast(ops.searchsorted(known, flat), "int32")
        found = ops.take(known, ops.minimum(at, ops.shape(known)[0] - 1)) == flat
        unknown_row = ops.shape(known)[0]
        return ops.reshape(ops.where(found, at, unknown_row), ops.shape(keys))

    def allowed(self, state, step, limits):
        """bool [rows, vocab]: the tokens each hypothesis may take at `step`."""
        words, tags, depth, labels, tags_at_open, rows = state
        kinds = ops.convert_to_tensor(self.kinds)[None, :]
        label_of = ops.convert_to_tensor(self.label_of)[None, :]
        remaining = limits - 1 - step  # positions after this one, EOS included
        top = ops.maximum(depth - 1, 0)[:, None]
        top_label = ops.take_along_axis(labels, top, axis=1)
        top_filled = tags[:, None] > ops.take_along_axis(tags_at_open, top, axis=1)
        words_left = words - tags
        tag_ok = (words_left > 0) & (depth + words_left <= remaining)
        open_ok = (words_left > 0) & (depth + words_left + 2 <= remaining)
        if self.max_depth is not None:
            # The constituents opened since the last tag are those opened at the current tag count.
            open_now = ops.arange(ops.shape(labels)[1])[None, :] < depth[:, None]
            run = ops.sum(ops.cast(open_now & (tags_at_open == tags[:, None]), "int32"), axis=1)
            open_ok = open_ok & (depth < self.max_depth) & (run < self.max_opens_in_a_row)
        close_ok = (depth > 0)[:, None] & top_filled & (label_of == top_label)
        eos_ok = (depth == 0) & (words_left == 0)
        vocab = ops.arange(ops.shape(kinds)[1])[None, :]
        tag_ok = tag_ok[:, None]
        if self.dictionary is not None:
            word = ops.minimum(tags, ops.shape(rows)[1] - 1)[:, None]
            row = ops.take_along_axis(rows, word, axis=1)[:, 0]
            allowed = ops.take(ops.convert_to_tensor(self.dictionary.allowed), row, axis=0)
            allowed = ops.concatenate([allowed, ops.ones_like(allowed[:, :1])], axis=1)
            tag_ok = tag_ok & ops.take(allowed, ops.convert_to_tensor(self.tag_column), axis=1)
        return (((kinds == TAG) & tag_ok) | ((kinds == OPEN) & open_ok[:, None])
                | ((kinds == CLOSE) & close_ok) | ((vocab == EOS_ID) & eos_ok[:, None]))

    def update(self, state, tokens):
        words, tags, depth, labels, tags_at_open, rows = state
        kinds = ops.take(ops.convert_to_tensor(self.kinds), tokens)
        label = ops.take(ops.convert_to_tensor(self.label_of), tokens)
        opens = kinds == OPEN
        at_top = (ops.arange(ops.shape(labels)[1])[None, :] == depth[:, None]) & opens[:, None]
        labels = ops.where(at_top, label[:, None], labels)
        tags_at_open = ops.where(at_top, tags[:, None], tags_at_open)
        depth = depth + ops.cast(opens, "int32") - ops.cast(kinds == CLOSE, "int32")
        tags = tags + ops.cast(kinds == TAG, "int32")
        return (words, tags, ops.clip(depth, 0, ops.shape(labels)[1] - 1), labels, tags_at_open,
                rows)
