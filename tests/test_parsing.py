"""Parsing: trees read, cleaned and linearized reversibly; a search constrained to well-formed
trees; a small model that learns a synthetic treebank; decoder and export agreeing; bad input."""

import itertools
import json
import re
import subprocess
import sys
import types

import numpy as np
import pytest

from reference_decoding import sequence_scores
from synthetic_treebank import write_treebank
from t2t_lite import cli, evalb
from t2t_lite.cli import datagen, decoder, exporter, trainer
from t2t_lite.decoding import search
from t2t_lite.errors import UserError
from t2t_lite.problems.tree_vocabulary import CLOSE, OPEN, OTHER, TAG, TreeConstraint
from t2t_lite.problems.trees import clean, delinearize, linearize, read_trees
from t2t_lite.runner import Runner
from t2t_lite.text import EOS_ID
from t2t_lite.training import create_model
from test_decoding import padded, random_model

LDC_TREES = """\
( (S
    (NP-SBJ-1 (DT The) (NN cat) )
    (VP (VBD picked)
      (PRT (RP up) )
      (NP (-NONE- *-1) )
      (NP (DT the) (NN toy) ))
    (. .) ))
( (S (NP-SBJ (-LRB- -LRB-) (NNP Bob) (-RRB- -RRB-) )
    (VP (VBD left) (ADVP-TMP (RB early) )
      (SBAR (-NONE- 0) (S (-NONE- *T*-2) )))
    (. .) ))
( (FRAG (NP=2 (NP (NN unary)))) ) ( (X (-NONE- *)) )
(S (NP (PRP It)) (VP (VBZ works)))
"""
CLEANED = [
    "(TOP (S (NP (DT The) (NN cat)) (VP (VBD picked) (PRT (RP up)) (NP (DT the) (NN toy))) "
    "(. .)))",
    "(TOP (S (NP (-LRB- -LRB-) (NNP Bob) (-RRB- -RRB-)) (VP (VBD left) (ADVP (RB early))) "
    "(. .)))",
    "(TOP (FRAG (NP (NP (NN unary)))))",
    None,  # only a trace
    "(TOP (S (NP (PRP It)) (VP (VBZ works))))",
]


def test_ldc_trees_are_read_cleaned_and_linearized_reversibly(tmp_path):
    path = tmp_path / "wsj_0001.mrg"
    path.write_text(LDC_TREES, encoding="utf-8")
    trees = [clean(tree) for tree in read_trees(str(path))]
    assert [str(t) if t else None for t in trees] == CLEANED
    assert " ".join(linearize(trees[0])) == (
        "S NP DT NN /NP VP VBD PRT RP /PRT NP DT NN /NP /VP . /S")
    assert linearize(trees[2]) == "FRAG NP NP NN /NP /NP /FRAG".split()
    for tree in filter(None, trees):
        tags = {leaf.label for leaf in tree.preterminals()}
        labels = {s[1:] for s in linearize(tree) if s.startswith("/")}
        rebuilt, repaired = delinearize(linearize(tree), tree.words(), tags, labels)
        assert (str(rebuilt), repaired) == (str(tree), False)


def test_ill_formed_outputs_are_repaired_and_counted():
    words = "a b c".split()
    tags, labels = {"DT", "NN"}, {"NP", "S"}
    cases = {  # output -> tree, repaired
        "S NP DT NN /NP NN /S": ("(TOP (S (NP (DT a) (NN b)) (NN c)))", False),
        "S NP DT NN": ("(TOP (S (NP (DT a) (NN b))) (XX c))", True),
        "S DT /NP NN NN NN NN /S /S": ("(TOP (S (DT a) (NN b) (NN c)))", True),
        "NP /NP S DT NN NN ▁x /S": ("(TOP (S (DT a) (NN b) (NN c)))", True),
    }
    for output, expected in cases.items():
        assert tuple(map(str, delinearize(output.split(), words, tags, labels))) == tuple(
            map(str, expected))


@pytest.mark.parametrize("text, message", [
    ("( (S (NP (DT a))) )\n(S (NN b)))\n", r"t.mrg, line 2: a '\)' closes no bracket"),
    ("(S (NP (DT a))\n\n(S (NN b))\n", r"t.mrg, line 1: the tree that starts here has 1 "),
    ("(S (NP (DT a) b))\n", r"t.mrg, line 1: word 'b' beside other children"),
])
def test_bracket_errors_name_the_file_and_line(tmp_path, text, message):
    path = tmp_path / "t.mrg"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=message):
        list(read_trees(str(path)))


# Ids of a toy parsing vocabulary: a word's first piece, tag T, label A and its closer, and a
# piece inside a word.
WORD, T, A, SLASH_A, PIECE = 2, 3, 4, 5, 6
TOY = types.SimpleNamespace(
    kinds=np.array([OTHER, OTHER, OTHER, TAG, OPEN, CLOSE, OTHER], "int32"),
    label_of=np.array([-1, -1, -1, -1, 0, 0, -1], "int32"),
    word_starts=np.array([False, False, True, False, False, False, False]))


def is_tree(sequence, words):
    """Brute-force validity: EOS-terminated, one T per word, every A closed after a tag."""
    if not sequence or sequence[-1] != EOS_ID:
        return False
    depth_tags, tags = [], 0
    for token in sequence[:-1]:
        if token == T:
            tags += 1
        elif token == A:
            depth_tags.append(tags)
        elif token != SLASH_A or not depth_tags or depth_tags.pop() == tags:
            return False
    return not depth_tags and tags == words


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_constrained_beam_search_finds_the_best_valid_tree_of_a_random_model(alpha):
    """Every output of a random model is a tree, and a wide beam's best is the best of all
    valid trees enumerated by brute force."""
    model = random_model(vocab_size=7, seed=3)
    inputs = padded([[WORD, WORD], [WORD, PIECE, WORD, WORD]])
    extra_length = 4
    constraint = TreeConstraint(TOY)
    for beam_size in (1, 3, 16):
        ids, scores = search(model, inputs, beam_size, alpha, extra_length, constraint)
        for row, words in enumerate((2, 3)):
            sequence = tuple(int(i) for i in np.asarray(ids[row]) if i)
            sequence = sequence[: sequence.index(EOS_ID) + 1] if EOS_ID in sequence else sequence
            assert is_tree(sequence, words), (beam_size, sequence)
    limit = 3 + extra_length  # of the first example
    valid = [s + (EOS_ID,) for n in range(limit) for s in itertools.product((T, A, SLASH_A),
                                                                            repeat=n)
             if is_tree(s + (EOS_ID,), 2)]
    best = max(zip(sequence_scores(model, inputs[0], valid, alpha), valid))
    ids, scores = search(model, inputs, 16, alpha, extra_length, constraint)
    assert tuple(int(i) for i in np.asarray(ids[0])[: len(best[1])]) == best[1]
    np.testing.assert_allclose(float(scores[0]), best[0], rtol=1e-5)
