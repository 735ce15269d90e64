"""Constituency parsing as in the paper's section 6.3: sentence -> linearized Penn Treebank tree,
scored by EVALB's bracketing F1 (COLLINS.prm).

`parsing_wsj` reads the LDC Treebank-3 (LDC99T42) WSJ sections (02-21 train, 22 dev, 23 test);
`t2t-lite-datagen --problem=NAME --task=parsing --train=T --dev=V [--test=E]` makes a problem of
any treebank in bracket syntax, recorded in the data_dir like the own-files translation problems.
Trees are cleaned and linearized by problems.trees; the vocabulary and the decoding constraint
live in problems.tree_vocabulary.
"""

import glob
import json
import logging
import os
import re

from t2t_lite.data.problem import Postprocessed, Problem
from t2t_lite.data.vocabulary import SentencePieceVocabulary
from t2t_lite.evaluation import evalb
from t2t_lite.problems.own_files import OwnFilesProblem, check_new_name
from t2t_lite.problems.tag_dictionary import word_tags_of
from t2t_lite.problems.translate import sentencepiece_path
from t2t_lite.problems.tree_vocabulary import ParsingVocabulary, symbols_path
from t2t_lite.problems.trees import (clean, delinearize, linearize, nesting, read_trees,
                                     treebank_files)
from t2t_lite.registry import register_problem
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import write_text_atomically

logger = logging.getLogger("t2t_lite")


class ParsingProblem(Problem):
    """Subclasses define `tree_files(split, raw_dir)`. Outputs become trees over the source's
    words (Problem.postprocess), repaired when a search without the constraint left them
    ill-formed; `repaired` in the metrics is the share of decoded outputs that needed it.
    """

    reference_unit = "references"

    vocab_size = 16000  # subwords of the sentences (the paper's WSJ-only setting)
    num_shards = {"train": 10, "dev": 1, "test": 1}
    metric_names = ("f1", "precision", "recall", "evalb_errors", "repaired")
    lower_is_better = ("evalb_errors", "repaired")

    def __init__(self):
        self._symbols = None  # (tags, labels), known once the vocabulary is loaded

    def tree_files(self, split, raw_dir):
        raise NotImplementedError

    def trees(self, split, raw_dir):
        """The cleaned trees of `split`; a split without trees is a UserError."""
        paths = self.tree_files(split, raw_dir)
        count = 0
        for path in paths:
            for tree in read_trees(path):
                cleaned = clean(tree)
                if cleaned is not None:
                    count += 1
                    yield cleaned
        if not count:
            raise UserError(f"no trees in the {split} files of {self.name} "
                            f"({', '.join(paths[:3])}{', ...' if len(paths) > 3 else ''})")

    def text_pairs(self, split, raw_dir):
        for tree in self.trees(split, raw_dir):
            yield " ".join(tree.words()), " ".join(linearize(tree))

    def vocabulary(self, data_dir):
        vocabulary = ParsingVocabulary.load(sentencepiece_path(self, data_dir, must_exist=True),
                                            symbols_path(data_dir, self.name))
        self._symbols = vocabulary.tag_set, vocabulary.label_set
        return vocabulary

    def build_vocabulary(self, data_dir, raw_dir):
        """SentencePiece subwords of the training sentences, and every tag and label of the
        treebank's splits as whole symbols."""
        path = sentencepiece_path(self, data_dir)
        if os.path.exists(path):
            vocabulary = self.vocabulary(data_dir)
            if vocabulary.words.size != self.vocab_size:
                raise UserError(f"{path} has {vocabulary.words.size} subwords, not the "
                                f"{self.vocab_size} asked for: use another --data_dir, or "
                                f"delete {data_dir}/{self.name}* to rebuild")
            return vocabulary
        sentences, tags, labels, train_trees = [], set(), set(), []
        max_depth = max_opens = 0
        for split in self.splits():
            for tree in self.trees(split, raw_dir):
                symbols = linearize(tree)
                tree_labels = {symbol[1:] for symbol in symbols if symbol.startswith("/")}
                if split == "train":
                    sentences.append(" ".join(tree.words()))
                    train_trees.append(tree)
                    depth, opens = nesting(symbols, tree_labels)
                    max_depth, max_opens = max(max_depth, depth), max(max_opens, opens)
                tags.update(leaf.label for leaf in tree.preterminals())
                labels |= tree_labels
        word_tags = word_tags_of(train_trees)
        logger.info("%s: %d tags and %d labels, a tag dictionary of %s training words, "
                    "constituents nested %d deep and opened %d in a row at most; training a "
                    "%d-piece vocabulary on %s sentences", self.name, len(tags), len(labels),
                    f"{len(word_tags):,}", max_depth, max_opens, self.vocab_size,
                    f"{len(sentences):,}")
        write_text_atomically(symbols_path(data_dir, self.name), json.dumps(
            {"tags": sorted(tags), "labels": sorted(labels), "max_depth": max_depth,
             "max_opens_in_a_row": max_opens, "word_tags": word_tags},
            indent=1, ensure_ascii=False) + "\n")
        SentencePieceVocabulary.train(path, sentences, self.vocab_size)
        return self.vocabulary(data_dir)

    # Decoding.

    def search_constraint(self, vocabulary):
        from t2t_lite.problems.tree_constraint import TreeConstraint  # Keras: only to search

        return TreeConstraint(vocabulary)

    def tf_postprocess(self, in_graph_vocabulary):
        return in_graph_vocabulary.trees

    def postprocess(self, source_text, output_text):
        """The Penn-bracket tree of a linearized output over the source's words (see
        problems.trees.delinearize), and whether it had to be repaired; empty for an empty
        source."""
        words = source_text.split()
        if not words:
            return Postprocessed("", False)
        if self._symbols is None:
            raise RuntimeError("postprocess needs the tags and labels: load the vocabulary")
        tree, repaired = delinearize(output_text.split(), words, *self._symbols)
        return Postprocessed(str(tree), repaired)

    def decode_metrics(self, hypotheses, references, *, repaired=0, bleu_tokenize=None):
        """EVALB's F1, precision and recall (COLLINS.prm, in 0..100) of postprocessed trees over
        the sentences it scores; the share it leaves out as errors (a word tagged as punctuation
        in one tree only), without which F1 could look high on a few sentences; and the share of
        trees postprocess had to repair (`repaired` of them)."""
        summary = evalb.evaluate(references, hypotheses)
        total = max(1, len(hypotheses))
        return {"f1": summary.f1, "precision": summary.precision, "recall": summary.recall,
                "evalb_errors": summary.errors / total, "repaired": repaired / total}

    def read_references(self, path):
        """Gold trees of a bracket file (one or several lines each), cleaned, as one line each."""
        return [str(tree) for tree in (clean(t) for t in read_trees(path)) if tree is not None]

    def reference_report(self, hypotheses, references, *, repaired=0, bleu_tokenize=None,
                         lowercase=False):
        """EVALB's summary line; the log says how many of the trees needed repair."""
        logger.info("%d of %d trees needed repair", repaired, len(hypotheses))
        return str(evalb.evaluate(references, hypotheses))


@register_problem
class ParsingWsj(ParsingProblem):
    """The Wall Street Journal part of the Penn Treebank (LDC99T42), which LDC licenses: pass
    its `parsed/mrg/wsj` directory, or one above it, as --raw_dir."""

    SECTIONS = {"train": range(2, 22), "dev": (22,), "test": (23,)}

    def tree_files(self, split, raw_dir):
        root = glob.escape(_wsj_root(raw_dir))  # a copy's directory may be named "x [1]"
        return sorted(path for section in self.SECTIONS[split]
                      for path in glob.glob(os.path.join(root, f"{section:02d}", "wsj_*.mrg")))


def _wsj_root(raw_dir):
    """The directory holding the sections 00..24 of wsj_NNNN.mrg files, in or below raw_dir."""
    for directory, subdirectories, _ in os.walk(raw_dir or "."):
        sections = [d for d in subdirectories if re.fullmatch(r"\d\d", d)]
        if {"02", "22", "23"} <= set(sections) and glob.glob(
                os.path.join(glob.escape(directory), "23", "wsj_*.mrg")):
            return directory
    raise UserError(f"--raw_dir={raw_dir} holds no WSJ treebank: expected the Treebank-3 "
                    "(LDC99T42) directory parsed/mrg/wsj, with sections 00..24 of "
                    "wsj_NNNN.mrg files, in or below it")


@register_problem
class ParsingFiles(OwnFilesProblem, ParsingProblem):
    """A treebank of the user's own bracket files, per split (see the module)."""

    how_to_make = ("parsing_files is made from your own treebank: run `t2t-lite-datagen "
                   "--problem=NAME --task=parsing --train=T --dev=V --data_dir=D`, then use "
                   "--problem=NAME --data_dir=D")

    @classmethod
    def create(cls, name, data_dir, *, train=None, dev=None, test=None, vocab_size=None):
        """The problem `name` made of the given treebank files, recorded in data_dir."""
        check_new_name(name)
        for flag, value in (("train", train), ("dev", dev)):
            if not value:
                raise UserError(f"--task=parsing needs --{flag}: a tree file, a directory of "
                                "them, or a glob")
        files = {split: treebank_files(pattern, split)
                 for split, pattern in (("train", train), ("dev", dev), ("test", test))
                 if pattern}
        spec = {"problem_class": "parsing_files", "files": files,
                "vocab_size": vocab_size or cls.vocab_size}
        return cls.record(name, data_dir, spec)

    def tree_files(self, split, raw_dir):
        return self.spec["files"][split]
