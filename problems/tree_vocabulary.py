"""The parsing vocabulary: subwords for sentences, whole symbols for trees (the search
constraint that makes every decoded output a well-formed tree is problems.tree_constraint, the
exported model's in-graph trees problems.tree_graph).

Ids: the SentencePiece pieces of the sentences first, then one id per tag, per label and per
closer `/label`, so that labels and tags are never split into pieces. The source side is encoded
with SentencePiece, the target side symbol by symbol.
"""

import os

import numpy as np

from t2t_lite.data.vocabulary import SentencePieceVocabulary, Vocabulary, strip_ids
from t2t_lite.problems.tag_dictionary import TagDictionary
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.json_records import damaged, read_record

# Kinds of ids, for the constraint and the in-graph trees.
OTHER, TAG, OPEN, CLOSE = 0, 1, 2, 3


class ParsingVocabulary(Vocabulary):
    def __init__(self, sentencepiece_model, tags, labels, word_tags=None, max_depth=None,
                 max_opens_in_a_row=None):
        """word_tags: {word: its training tags}, the search's tag dictionary; max_depth and
        max_opens_in_a_row: the training trees' largest nesting (problems.trees.nesting), which
        the search's outputs keep within (None: no such limit, as in data_dirs made before
        these existed)."""
        super().__init__()
        self.max_depth, self.max_opens_in_a_row = max_depth, max_opens_in_a_row
        self.words = SentencePieceVocabulary(sentencepiece_model)
        self.tags, self.labels = sorted(tags), sorted(labels)
        overlap = set(self.tags) & set(self.labels)
        if overlap:
            raise UserError(f"{', '.join(sorted(overlap))} label both words and constituents: "
                            "the linearized trees need tags and phrase labels to differ")
        self.symbols = self.tags + self.labels + ["/" + label for label in self.labels]
        self.offset = self.words.size
        self.size = self.offset + len(self.symbols)
        self._ids = {symbol: self.offset + i for i, symbol in enumerate(self.symbols)}
        self.tag_set, self.label_set = frozenset(self.tags), frozenset(self.labels)
        # Per id: its kind, its label's index (openers and closers), and whether it starts a
        # word (a SentencePiece piece beginning with the word boundary mark).
        kinds = [TAG] * len(self.tags) + [OPEN] * len(self.labels) + [CLOSE] * len(self.labels)
        self.kinds = np.array([OTHER] * self.offset + kinds, "int32")
        label_index = list(range(len(self.labels)))
        self.label_of = np.array([-1] * (self.offset + len(self.tags)) + label_index * 2, "int32")
        pieces = [self.words._processor.id_to_piece(i) for i in range(self.offset)]
        self.word_starts = np.array(
            [piece.startswith("\u2581") and not self.words._processor.is_control(i)
             for i, piece in enumerate(pieces)] + [False] * len(self.symbols))
        # Per id: the tag's column in the dictionary's rows, and len(tags) for other ids.
        self.tag_column = np.array([len(self.tags)] * self.offset + list(range(len(self.tags)))
                                   + [len(self.tags)] * 2 * len(self.labels), "int32")
        self.tag_dictionary = None if word_tags is None else TagDictionary(
            word_tags, self.words.encode, self.tags, self.size)

    @classmethod
    def load(cls, model_path, symbols_path):
        """The words' SentencePiece model and the treebank's symbols (a JSON object of "tags"
        and "labels", and the tag dictionary and nesting limits the search keeps to); a damaged
        file is a UserError naming it and what is wrong."""
        words = SentencePieceVocabulary.load(model_path)
        fix = ("restore the symbols file datagen wrote from a copy: the data shards need these "
               "very symbols")
        try:
            symbols = read_record(symbols_path, dict, fix)
        except FileNotFoundError:
            raise UserError(f"{symbols_path} is missing (deleted, or a bad copy?): "
                            f"{fix}") from None
        wrong = symbols_problem(symbols)
        if wrong:
            raise damaged(symbols_path, wrong, fix)
        limits = {key: symbols[key] for key in ("max_depth", "max_opens_in_a_row")
                  if key in symbols}
        return cls(words.model_proto, symbols["tags"], symbols["labels"],
                   symbols.get("word_tags"), **limits)

    def encode(self, text):
        return self.words.encode(text)

    def encode_target(self, text):
        try:
            return [self._ids[symbol] for symbol in text.split()]
        except KeyError as error:
            raise UserError(f"'{error.args[0]}' is not a tag or label of this treebank") from None

    def decode(self, ids):
        """Subword runs as text, symbols by name, separated by spaces."""
        parts, run = [], []
        for i in strip_ids(ids):
            if i < self.offset:
                run.append(i)
                continue
            if run:
                parts.append(self.words.decode(run))
                run = []
            parts.append(self.symbols[i - self.offset])
        if run:
            parts.append(self.words.decode(run))
        return " ".join(parts)

    def pieces(self, ids):
        """SentencePiece's pieces for a sentence's ids, and the symbols' own names for a tree's
        ("S", "NN", "/S"), so that a linearized tree's pieces are its symbols: attention plots
        are labeled with what the model reads and writes."""
        return [self.symbols[i - self.offset] if i >= self.offset else self.words.pieces([i])[0]
                for i in np.asarray(ids).tolist()]

    def tokens(self):
        """The words' pieces, then `<tree SYMBOL>` for each symbol: with a space, which no
        SentencePiece piece holds, so that a symbol never matches a piece of the same name."""
        return self.words.tokens() + [f"<tree {symbol}>" for symbol in self.symbols]

    def _make_in_graph(self):
        from t2t_lite.problems.tree_graph import InGraphTrees

        return InGraphTrees(self.words.in_graph(), self.symbols, self.kinds, self.offset)


# The deepest nesting a symbols file may name: trees this deep are far longer than any model's
# outputs (a limit of 0, or one no training tree reached, made every output flat).
MAX_NESTING = 10_000


def symbols_problem(symbols):
    """What is wrong with `symbols` (a symbols file's JSON value), or None."""
    if not isinstance(symbols, dict):
        return "not a JSON object"
    for key in ("tags", "labels"):
        names = symbols.get(key)
        if not (isinstance(names, list) and all(isinstance(n, str) and n for n in names)
                and len(set(names)) == len(names)):
            return f'"{key}" is not a list of distinct names'
    word_tags = symbols.get("word_tags")
    if word_tags is not None and not (isinstance(word_tags, dict) and all(
            isinstance(tags, list) and tags and all(isinstance(t, str) for t in tags)
            and set(tags) <= set(symbols["tags"]) for tags in word_tags.values())):
        return '"word_tags" is not an object of words and lists of their "tags"'
    for key in ("max_depth", "max_opens_in_a_row"):
        value = symbols.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or not (
                1 <= value <= MAX_NESTING):
            return f'"{key}" is {value!r}, not a whole number from 1 to {MAX_NESTING:,}'
    return None


def symbols_path(data_dir, name):
    return os.path.join(data_dir, f"{name}.symbols.json")
