"""Lexically constrained beam search (t2t_lite.decoding.lexical) against exhaustive search and
brute force: outputs contain their phrases, and without phrases the search is beam search."""

import numpy as np
import pytest
from keras import ops
from reference_decoding import as_sequence, exhaustive_search
from test_decoding import hypotheses, padded, random_model

from t2t_lite.config import EOS_ID, PAD_ID
from t2t_lite.decoding import lexical
from t2t_lite.decoding.inputs import phrase_array
from t2t_lite.decoding.search import SearchSettings, beam_search, constrained_beam_search

pytestmark = pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1")


def contains(sequence, phrase):
    """Whether `phrase` (ids, PAD-padded) occurs contiguously in `sequence`."""
    phrase = tuple(int(t) for t in phrase if t != PAD_ID)
    return any(tuple(sequence[i: i + len(phrase)]) == phrase
               for i in range(len(sequence) - len(phrase) + 1))


def test_the_tracker_knows_which_phrases_a_sequence_contains():
    """After each token of random sequences over 3 symbols, `met` is brute force's `contains`
    and `partial` the longest prefix of the phrase the sequence ends with: repeated tokens
    ("2 2 3" after "2 2 2 3"), phrases inside phrases and overlapping ones included."""
    rng = np.random.default_rng(0)
    phrases = phrase_array([[[2, 2, 3], [3], [2, 3, 2, 2]], [[4, 4, 4], [2, 4], [3, 2]]])
    sequences = rng.integers(2, 5, size=(2, 3, 12)).astype("int32")
    state = lexical.start(np.repeat(phrases, 3, axis=0))
    flat = sequences.reshape(6, 12)
    for step in range(12):
        state = lexical.advance(state, flat[:, step])
        for row in range(6):
            seen = tuple(flat[row, : step + 1])
            for c, phrase in enumerate(phrases[row // 3]):
                ids = [int(t) for t in phrase if t]
                met = contains(seen, phrase)
                assert bool(state.met[row, c]) == met, (seen, ids)
                longest_prefix = 0 if met else max(
                    k for k in range(len(ids)) if k == 0 or seen[-k:] == tuple(ids[:k]))
                assert int(state.partial[row, c]) == longest_prefix, (seen, ids)
            met = [contains(seen, p) for p in phrases[row // 3]]
            expected = sum(int((p != PAD_ID).sum()) for p, m in zip(phrases[row // 3], met) if m)
            expected += max([int(state.partial[row, c]) for c, m in enumerate(met) if not m],
                            default=0)
            assert int(lexical.progress(state)[row]) == expected


def test_the_beam_is_filled_by_turns_from_the_banks():
    """Candidates of banks (progress) 0, 0, 0, 1, 2, 2 with scores -1..-6: turn 1 takes each
    bank's best, highest bank first (bank 2: -5, bank 1: -4, bank 0: -1), then turn 2 (-6, -2),
    then -3; an invalid candidate never comes before a valid one."""
    scores = np.array([[-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -0.5]], "float32")
    banks = np.array([[0, 0, 0, 1, 2, 2, 2]], "int32")
    valid = np.array([[True] * 6 + [False]])
    order = ops.convert_to_numpy(lexical.allocation_order(scores, banks, valid, 2))
    assert list(np.argsort(-order[0], kind="stable")) == [4, 3, 0, 5, 1, 2, 6]


@pytest.mark.parametrize("alpha, min_length", [(0.0, 0), (0.6, 2)])
def test_a_beam_wide_enough_finds_the_exhaustive_search_best_that_meets_the_phrases(
        alpha, min_length):
    """3 symbols and limits of 4 and 3 tokens: an 81-wide beam keeps every candidate, so its
    finished set must be, in order, every possible output that contains all its phrases (EOS
    only after them, and after min_length tokens) by score, then the outputs cut at the limit
    that fail them, by score; with a repeated token, two phrases, one phrase, and one example
    whose phrases overlap."""
    model = random_model(vocab_size=5, seed=1, rare_eos=True)
    inputs = padded([[2, 3], [4], [3, 3]])
    examples = [[[3, 3], [4]], [[2]], [[2, 4], [4, 3]]]
    phrases = phrase_array(examples)
    ids, scores, met = constrained_beam_search(model, inputs, phrases,
                                               SearchSettings(81, alpha, 1, min_length))
    for row, example in enumerate(examples):
        every = exhaustive_search(model, inputs[row], alpha, 1, 10 ** 6, min_length)
        meeting = [(s, v) for s, v in every if all(contains(s, p) for p in example)]
        failing = [(s, v) for s, v in every
                   if s[-1] != EOS_ID and not all(contains(s, p) for p in example)]
        expected = (meeting + failing)[:81]
        found = [h for h in hypotheses(ids[row], scores[row]) if h[1] > -1e8]
        assert [s for s, _ in found] == [s for s, _ in expected]
        np.testing.assert_allclose([v for _, v in found], [v for _, v in expected], rtol=1e-4,
                                   atol=1e-5)
        for (sequence, _), flags in zip(found, np.asarray(met[row])):
            assert list(flags[: len(example)]) == [contains(sequence, p) for p in example]
        assert len(meeting) > 0 and len(failing) > 0


def test_a_narrow_beam_meets_every_phrase_it_has_room_for():
    """Beams of 1 and 4 on a vocabulary of 20, three phrases of up to 3 random ids per
    example (repeats allowed), and room for them (extra_length 12): every output contains its
    phrases and says so, though the unconstrained outputs do not (this model seldom ends, so
    an output may be cut at its limit)."""
    model = random_model(vocab_size=20, seed=4, rare_eos=True)
    rng = np.random.default_rng(4)
    inputs = padded([list(rng.integers(2, 20, size=n)) for n in (3, 5, 2, 4)])
    examples = [[list(rng.integers(2, 20, size=rng.integers(1, 4))) for _ in range(3)]
                for _ in range(len(inputs))]
    phrases = phrase_array(examples)
    plain, _ = beam_search(model, inputs, SearchSettings(4, 0.6, 12))
    assert not all(contains(as_sequence(plain[b, 0]), p)
                   for b, example in enumerate(examples) for p in example)
    for beam_size in (1, 4):
        ids, _, met = constrained_beam_search(model, inputs, phrases,
                                              SearchSettings(beam_size, 0.6, 12))
        for b, example in enumerate(examples):
            best = as_sequence(ids[b, 0])
            assert all(contains(best, p) for p in example), (beam_size, example, best)
            assert np.asarray(met[b, 0]).all()


@pytest.mark.parametrize("beam_size, min_length", [(1, 0), (4, 0), (4, 3)])
def test_without_phrases_the_search_is_beam_search(beam_size, min_length):
    """Examples without phrases (a batch of none, and one example of none beside one with
    some): outputs and scores bit-identical to beam search's."""
    model = random_model(vocab_size=9, seed=2, rare_eos=True)
    inputs = padded([[2, 3, 4], [5], [6, 7]])
    settings = SearchSettings(beam_size, 0.6, 3, min_length=min_length)
    ids, scores = (ops.convert_to_numpy(x) for x in beam_search(model, inputs, settings))
    for phrases in (np.zeros((3, 1, 1), "int32"), phrase_array([[[3]], [], [[8, 8]]])):
        constrained, constrained_scores, _ = constrained_beam_search(model, inputs, phrases,
                                                                     settings)
        free = [b for b in range(3) if not phrases[b].any()]
        np.testing.assert_array_equal(np.asarray(constrained)[free], ids[free])
        np.testing.assert_array_equal(np.asarray(constrained_scores)[free], scores[free])


def test_first_occurrences_drops_repeats_and_tokens_already_candidates():
    tokens = np.array([[5, 6, 5, PAD_ID, EOS_ID, 7]], "int32")
    seen = np.array([[7, 9]], "int32")
    assert list(ops.convert_to_numpy(lexical.first_occurrences(tokens, seen))[0]) == [
        True, True, False, False, False, False]
