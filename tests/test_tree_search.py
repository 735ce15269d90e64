"""The parsing search's constraint against brute force: on toy vocabularies and random models,
every output is a well-formed tree of the input's words whose tags follow the tag dictionary, and
a wide beam's best is the best such tree of all those enumerated; the same under the
treebank's nesting limits."""

import itertools
import types

import numpy as np
import pytest
from reference_decoding import sequence_scores
from test_decoding import padded, random_model

from t2t_lite.config import EOS_ID
from t2t_lite.decoding.search import SearchSettings, search
from t2t_lite.problems.tree_constraint import TreeConstraint
from t2t_lite.problems.tree_vocabulary import CLOSE, OPEN, OTHER, TAG

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
        ids, scores = search(model, inputs, SearchSettings(beam_size, alpha, extra_length),
                             constraint)
        for row, words in enumerate((2, 3)):
            sequence = tuple(int(i) for i in np.asarray(ids[row]) if i)
            sequence = sequence[: sequence.index(EOS_ID) + 1] if EOS_ID in sequence else sequence
            assert is_tree(sequence, words), (beam_size, sequence)
    limit = 3 + extra_length  # of the first example
    valid = [s + (EOS_ID,) for n in range(limit) for s in itertools.product((T, A, SLASH_A),
                                                                            repeat=n)
             if is_tree(s + (EOS_ID,), 2)]
    best = max(zip(sequence_scores(model, inputs[0], valid, alpha), valid))
    ids, scores = search(model, inputs, SearchSettings(16, alpha, extra_length), constraint)
    assert tuple(int(i) for i in np.asarray(ids[0])[: len(best[1])]) == best[1]
    np.testing.assert_allclose(float(scores[0]), best[0], rtol=1e-5)


# A toy vocabulary with a tag dictionary: words `cat` (NN), `,` (the comma tag), `run` (NN or
# VB), `cats` (VB; the pieces cat + s) and the unknown `new`; tags sorted as the vocabulary sorts.
CAT, COMMA, RUN, NEW, S_PIECE, NN, COMMA_TAG, VB, A2, SLASH_A2 = range(2, 12)
WORD_TAGS = {"cat": ["NN"], ",": [","], "run": ["NN", "VB"], "cats": ["VB"]}
WORD_PIECES = {"cat": [CAT], ",": [COMMA], "run": [RUN], "cats": [CAT, S_PIECE]}
TAG_OF = {NN: "NN", COMMA_TAG: ",", VB: "VB"}


def toy_with_dictionary(dictionary=True):
    from t2t_lite.problems.tag_dictionary import TagDictionary

    tags = sorted(TAG_OF.values())
    return types.SimpleNamespace(
        kinds=np.array([OTHER] * 7 + [TAG] * 3 + [OPEN, CLOSE], "int32"),
        label_of=np.array([-1] * 10 + [0, 0], "int32"),
        word_starts=np.array([False, False, True, True, True, True] + [False] * 6),
        tag_column=np.array([3] * 7 + [tags.index(TAG_OF[i]) for i in (NN, COMMA_TAG, VB)]
                            + [3, 3], "int32"),
        tag_dictionary=TagDictionary(WORD_TAGS, WORD_PIECES.get, tags, 12) if dictionary
        else None)


def follows_dictionary(sequence, word_pieces):
    """Brute force: the i-th tag is one the dictionary lists for the i-th word, and never the
    comma's for a word it does not know."""
    tags = [TAG_OF[token] for token in sequence if token in TAG_OF]
    known = {tuple(pieces): word for word, pieces in WORD_PIECES.items()}
    return all(tag in WORD_TAGS[known[tuple(pieces)]] if tuple(pieces) in known else tag != ","
               for tag, pieces in zip(tags, word_pieces))


def toy_tree(sequence, words):
    """is_tree over the toy vocabulary with a dictionary: any tag counts as a tag."""
    mapped = tuple({NN: T, COMMA_TAG: T, VB: T, A2: A, SLASH_A2: SLASH_A}.get(t, t)
                   for t in sequence)
    return is_tree(mapped, words)


@pytest.mark.slow  # a brute-force search: ~6 s each
@pytest.mark.parametrize("seed", [3, 4])
def test_the_tag_dictionary_rule_equals_brute_force(seed):
    """Every output tags a known word with a tag it was seen with and an unknown one never with
    a deleted punctuation tag; a wide beam's best is the best such tree by brute force; the key
    computed in the graph finds the same dictionary row as numpy's for each word."""
    model = random_model(vocab_size=12, seed=seed)
    words = [[RUN], [COMMA], [CAT, S_PIECE]], [[NEW], [CAT], [NEW, S_PIECE]]
    inputs = padded([sum(sentence, []) for sentence in words])
    extra_length = 3
    vocabulary = toy_with_dictionary()
    constraint = TreeConstraint(vocabulary)
    rows = np.asarray(constraint._dictionary_rows(
        inputs, np.take(vocabulary.word_starts.astype("int32"), inputs)))
    for row, sentence in zip(rows, words):
        for k, pieces in enumerate(sentence):
            np.testing.assert_array_equal(vocabulary.tag_dictionary.allowed[row[k]],
                                          vocabulary.tag_dictionary.tags_of(pieces))
    for example, sentence in enumerate(words):
        limit = len(sum(sentence, [])) + 1 + extra_length
        candidates = [s + (EOS_ID,) for n in range(limit) for s in
                      itertools.product((NN, COMMA_TAG, VB, A2, SLASH_A2), repeat=n)
                      if n >= 3 and toy_tree(s + (EOS_ID,), 3)]
        valid = [s for s in candidates if follows_dictionary(s, sentence)]
        assert 0 < len(valid) < len(candidates)  # the rule removes trees
        best = max(zip(sequence_scores(model, inputs[example], valid, 0.6), valid))
        for beam_size in (1, 4, 64):
            ids, scores = search(model, inputs, SearchSettings(beam_size, 0.6, extra_length),
                                 constraint)
            sequence = tuple(int(i) for i in np.asarray(ids[example]) if i)
            sequence = sequence[: sequence.index(EOS_ID) + 1]
            assert sequence in valid, (beam_size, sequence)
            if beam_size == 64:
                assert sequence == best[1]
                np.testing.assert_allclose(float(scores[example]), best[0], rtol=1e-5)
    free = TreeConstraint(toy_with_dictionary(False))
    widest = SearchSettings(64, 0.6, extra_length)
    assert not np.array_equal(*(np.asarray(search(model, inputs, widest, c)[0])
                                for c in (constraint, free)))


def within_nesting(sequence, max_depth, max_opens_in_a_row):
    """Brute force: never more than max_depth constituents open at once, nor more than
    max_opens_in_a_row opened in a row."""
    depth = run = 0
    for token in sequence:
        if token == A:
            depth, run = depth + 1, run + 1
            if depth > max_depth or run > max_opens_in_a_row:
                return False
        else:
            depth -= token == SLASH_A
            run = 0
    return True


@pytest.mark.parametrize("seed, max_depth, max_opens_in_a_row", [(3, 2, 1), (5, 1, 1),
                                                                  (6, 2, 2)])
def test_the_nesting_limits_equal_brute_force(seed, max_depth, max_opens_in_a_row):
    """Every output keeps within the limits, and a wide beam's best is the best such tree of
    all those enumerated; the limits remove trees the free search could output."""
    model = random_model(vocab_size=7, seed=seed)
    inputs = padded([[WORD, WORD, WORD]])
    extra_length = 6
    limited = TreeConstraint(types.SimpleNamespace(**vars(TOY), max_depth=max_depth,
                                                   max_opens_in_a_row=max_opens_in_a_row))
    limit = 4 + extra_length  # three tags and EOS
    trees = [s + (EOS_ID,) for n in range(limit) for s in itertools.product((T, A, SLASH_A),
                                                                           repeat=n)
             if is_tree(s + (EOS_ID,), 3)]
    valid = [s for s in trees if within_nesting(s, max_depth, max_opens_in_a_row)]
    assert 0 < len(valid) < len(trees)
    best = max(zip(sequence_scores(model, inputs[0], valid, 0.6), valid))
    for beam_size in (1, 4, 64):
        ids, scores = search(model, inputs, SearchSettings(beam_size, 0.6, extra_length),
                             limited)
        sequence = tuple(int(i) for i in np.asarray(ids[0]) if i)
        sequence = sequence[: sequence.index(EOS_ID) + 1]
        assert sequence in valid, (beam_size, sequence)
    assert sequence == best[1]
    np.testing.assert_allclose(float(scores[0]), best[0], rtol=1e-5)
