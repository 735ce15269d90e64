"""Beam and greedy search against exhaustive search and slow uncached reference decoders."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops
from reference_decoding import (
    UncachedDecoder,
    as_sequence,
    exhaustive_search,
    reference_beam_search,
    reference_greedy_search,
    sequence_scores,
)

from t2t_lite import registry
from t2t_lite.config import EOS_ID, PAD_ID, HParams
from t2t_lite.data.vocabulary import SymbolVocabulary, strip_ids
from t2t_lite.decoding.decode import decode_file
from t2t_lite.decoding.search import SearchSettings, _top_k, beam_search, search
from t2t_lite.backends.tensorflow.translator import TensorFlowTranslator
from t2t_lite.decoding.visible_ending import blank_ids
from t2t_lite.models.transformer import Transformer

# The reference decoders score the empty prefix, whose self-attention has one position.
pytestmark = pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1")


class RareEosTransformer(Transformer):
    """Random weights with EOS made rarer, so that hypotheses grow over several steps."""

    def _logits(self, x):
        return super()._logits(x) - 3.0 * ops.cast(ops.arange(self.vocab_size) == EOS_ID,
                                                   "float32")


def random_model(vocab_size, seed=0, rare_eos=False):
    keras.utils.set_random_seed(seed)
    hparams = HParams(num_encoder_layers=1, num_decoder_layers=2, d_model=16, d_ff=32,
                      num_heads=2, dropout=0.0)
    return (RareEosTransformer if rare_eos else Transformer)(hparams,
                                                             vocab_size).create_variables()


def eos_prone_model(vocab_size, seed, bias=3.0):
    """A random model that likes to stop, as a half-trained one's EOS bias: its best output is
    often empty or cut short. In its weights (so that a CTranslate2 conversion has it too): the
    last norm's offset is 1 everywhere and EOS's embedding gains bias/d_model everywhere, so
    EOS's logit gains about `bias`, more or less with the prefix (PAD's loses as much: PAD is
    never output, and a model that prefers it is another test's)."""
    model = random_model(vocab_size, seed)
    d_model = model.hparams.d_model
    model.decoder_layers[-1].feed_forward_norm.beta.assign(np.ones(d_model, "float32"))
    embeddings = model.embedding.embeddings.numpy()
    embeddings[EOS_ID] += bias / d_model
    embeddings[PAD_ID] -= bias / d_model
    model.embedding.embeddings.assign(embeddings)
    return model


def padded(rows):
    """Rows of symbol ids -> EOS-terminated, PAD-padded int32 inputs."""
    length = max(len(r) for r in rows) + 1
    return np.array([list(r) + [EOS_ID] + [PAD_ID] * (length - len(r) - 1) for r in rows],
                    "int32")


def hypotheses(ids, scores):
    """[K, T] ids and [K] scores of one example -> [(sequence, score)]."""
    return [(as_sequence(row), float(score)) for row, score in zip(ids, scores)]


def assert_same_hypotheses(actual, expected):
    assert [s for s, _ in actual] == [s for s, _ in expected]
    np.testing.assert_allclose([v for _, v in actual], [v for _, v in expected], rtol=1e-4,
                               atol=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_a_beam_wide_enough_finds_the_exhaustive_search_best(alpha):
    """3 symbols, limits of 4 and 3 tokens: a 27-wide beam holds every prefix, so its finished
    set must be the exact top 27 of all 3^4 + 40 possible hypotheses, in order."""
    model = random_model(vocab_size=5)
    inputs = padded([[2, 3], [4]])
    ids, scores = beam_search(model, inputs,
                              SearchSettings(beam_size=27, alpha=alpha, extra_length=1))
    for row in range(len(inputs)):
        expected = exhaustive_search(model, inputs[row], alpha, extra_length=1, top=27)
        assert_same_hypotheses(hypotheses(ids[row], scores[row]), expected)


def test_the_decoders_n_best_are_the_k_best_of_an_exhaustive_search(tmp_path):
    """The decoder's --n_best=K file (through a 27-wide beam, which holds every prefix of 3
    symbols up to the limits of 4 and 3 tokens) lists for each line the K best of all possible
    hypotheses, found exhaustively, best first with their scores; an empty line gets K empty
    ones. Lines of several lengths in batches of 2, so the n-best lists must find their lines."""
    model = random_model(vocab_size=5, seed=6, rare_eos=True)
    vocabulary = SymbolVocabulary(3)
    hparams = HParams(beam_size=27, alpha=0.6, extra_length=1)
    translator = TensorFlowTranslator(model, vocabulary, hparams, batch_size=2)
    sources, k = ["0 1", "", "2", "1 1", "0"], 5
    decode_file(translator, registry.problem("algorithmic_copy"), sources, "sources.txt",
                output_path=str(tmp_path / "n_best"), n_best=k)
    rows = [line.split("\t") for line in (tmp_path / "n_best").read_text().splitlines()]
    assert len(rows) == k * len(sources)
    for i, source in enumerate(sources):
        if source:
            inputs = padded([vocabulary.encode(source)])[0]
            expected = [(vocabulary.decode(sequence), score) for sequence, score in
                        exhaustive_search(model, inputs, hparams.alpha, 1, top=k)]
        else:
            expected = [("", 0.0)] * k
        texts, scores = zip(*rows[k * i: k * (i + 1)])
        assert list(texts) == [text for text, _ in expected], source
        np.testing.assert_allclose(np.float64(scores), [score for _, score in expected],
                                   rtol=1e-5, atol=2e-6)
    assert len({text for text, _ in rows}) > k  # the lists differ from line to line


@pytest.mark.parametrize("min_length", [1, 2])
def test_a_minimum_length_is_searched_exactly(min_length):
    """On a model that prefers to stop, EOS before min_length tokens is never chosen: a 27-wide
    beam finds the exact top 27 of the exhaustive search under the same rule, greedy search the
    reference's, and the rule changes what the search finds (without it, outputs end early)."""
    model = eos_prone_model(vocab_size=5, seed=3)
    inputs = padded([[2, 3], [4]])
    ids, scores = beam_search(model, inputs, SearchSettings(27, 0.6, 1, min_length=min_length))
    greedy_ids, greedy_scores = search(model, inputs,
                                       SearchSettings(1, 0.6, 1, min_length=min_length))
    unconstrained, _ = search(model, inputs, SearchSettings(1, 0.6, 1))
    for row in range(len(inputs)):
        expected = exhaustive_search(model, inputs[row], 0.6, 1, 27, min_length)
        assert_same_hypotheses(hypotheses(ids[row], scores[row]), expected)
        assert all(len(sequence) > min_length for sequence, _ in expected)
        sequence, score = reference_greedy_search(model, inputs[row], 0.6, 1, min_length)
        assert as_sequence(greedy_ids[row]) == sequence
        assert float(greedy_scores[row]) == pytest.approx(score, rel=1e-4, abs=1e-5)
    assert [len(as_sequence(row)) for row in ops.convert_to_numpy(unconstrained)] == [1, 1]


@pytest.mark.slow  # 4 translators, each traced anew: ~6 s
def test_a_non_empty_input_never_gets_an_empty_output_by_default():
    """The hparams' min_length (1) keeps the translator's outputs non-empty, beam and greedy,
    on a model whose best output for most inputs is the empty one (min_length=0 shows it)."""
    model = eos_prone_model(vocab_size=12, seed=4, bias=6.0)
    vocabulary = SymbolVocabulary(10)
    sources = ["1 2 3", "4", "5 6 7 8", "9 9", "0 1 0"]
    for beam_size in (1, 4):
        hparams = HParams(beam_size=beam_size, extra_length=3)
        assert hparams.min_length == 1
        translated = TensorFlowTranslator(model, vocabulary, hparams).translate(sources)
        assert all(t.text for t in translated)
        empty = TensorFlowTranslator(model, vocabulary,
                                     hparams.replace(min_length=0)).translate(sources)
        assert sum(not t.text for t in empty) >= 3


class BlankFirstSymbols(SymbolVocabulary):
    """Symbols whose first (id 2) shows no text, as SentencePiece's lone "▁" does."""

    def decode(self, ids):
        return " ".join(str(i - 2) for i in strip_ids(ids) if i != 2)


class NotFirst:
    """A search constraint (see t2t_lite.decoding.search): `token` is never the first."""

    def __init__(self, token):
        self.token = token

    def start(self, inputs, max_length):
        return ()

    def allowed(self, state, step, limits):
        return ops.logical_not((ops.arange(5)[None, :] == self.token) & (step == 0))

    def update(self, state, tokens):
        return ()


@pytest.mark.parametrize("constraint", [None, NotFirst(3)])
def test_no_output_ends_right_after_a_token_that_shows_no_text(constraint):
    """On a model that likes the blank token and then EOS, min_length 1 alone gives outputs
    that read empty; with the blank ids (the translator's default), a 27-wide beam finds the
    exact top 27 of the exhaustive search among hypotheses that end neither with the blank and
    EOS nor with the blank at the limit (and, with a constraint besides, obey it too), greedy
    search the reference's under the same rule, and no translation is empty."""
    model = eos_prone_model(vocab_size=5, seed=3, bias=5.0)
    embeddings = model.embedding.embeddings.numpy()
    embeddings[2] += 1.0 / model.hparams.d_model
    model.embedding.embeddings.assign(embeddings)
    vocabulary = BlankFirstSymbols(3)
    assert blank_ids(vocabulary) == (2,)
    inputs = padded([[2, 3], [4]])
    ids, scores = beam_search(model, inputs, SearchSettings(27, 0.6, 1, min_length=1), constraint,
                              blank=(2,))
    for row in range(len(inputs)):
        expected = [(sequence, score) for sequence, score
                    in exhaustive_search(model, inputs[row], 0.6, 1, 10**4, min_length=1)
                    if sequence[-2:] != (2, EOS_ID) and sequence[-1] != 2
                    and (constraint is None or sequence[0] != constraint.token)][:27]
        found = [(s, v) for s, v in hypotheses(ids[row], scores[row]) if v > -1e8]
        assert len(found) == len(expected)  # fewer than 27 possible for the second
        assert_same_hypotheses(found, expected)
    if constraint is not None:
        return
    greedy_ids, greedy_scores = search(model, inputs, SearchSettings(1, 0.6, 1, min_length=1),
                                       blank=(2,))
    for row in range(len(inputs)):
        sequence, score = reference_greedy_search(model, inputs[row], 0.6, 1, 1, blank=(2,))
        assert as_sequence(greedy_ids[row]) == sequence
        assert float(greedy_scores[row]) == pytest.approx(score, rel=1e-4, abs=1e-5)
    for beam_size in (1, 4):
        without_rule, _ = search(model, inputs, SearchSettings(beam_size, 0.6, 1, min_length=1))
        assert [as_sequence(row) for row in ops.convert_to_numpy(without_rule)] == [
            (2, EOS_ID), (2, EOS_ID)]
        translated = TensorFlowTranslator(model, vocabulary, HParams(
            beam_size=beam_size, alpha=0.6, extra_length=1)).translate(["0 1", "2"])
        assert all(t.text for t in translated)


def test_a_file_of_many_batch_shapes_traces_the_search_once():
    """Length-sorted batches of a file come in several [batch, length] shapes; the search must
    be traced into a graph once for all of them, not once per shape (tracing is most of the
    first translation's time). The same for the n-best search."""
    translator = TensorFlowTranslator(random_model(vocab_size=8, seed=2), SymbolVocabulary(6),
                                      HParams(beam_size=3, alpha=0.6, extra_length=2),
                                      batch_size=2)
    token_lists = [[2 + i % 6] * length for i, length in enumerate([1, 5, 2, 7, 3, 3, 9])]
    translator.translate_tokens(token_lists)  # batches of 2x2, 2x3, 2x7 and 1x9 ids
    assert translator._search.experimental_get_tracing_count() == 1
    assert translator.translate_ids.experimental_get_tracing_count() == 1
    translator.translate_n_best(token_lists, 2)
    assert translator._n_best_search.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("alpha, vocab_size, extra_length", [(0.0, 7, 5), (0.6, 7, 5),
                                                              (0.6, 3000, 2)])
def test_narrow_beam_equals_the_plain_reference_beam_search(alpha, vocab_size, extra_length):
    """Pruning, length limits and early stopping, on a batch whose examples differ in length;
    a large vocabulary takes the two-stage top-k."""
    model = random_model(vocab_size, seed=1, rare_eos=True)
    inputs = padded([[2, 3, 4, 5], [6], [3, 3]])
    ids, scores = beam_search(model, inputs, SearchSettings(3, alpha, extra_length))
    for row in range(len(inputs)):
        expected = reference_beam_search(model, inputs[row], 3, alpha, extra_length)
        assert_same_hypotheses(hypotheses(ids[row], scores[row]), expected)


@pytest.mark.parametrize("width", [3000, 32000, 32001])
def test_two_stage_top_k_equals_top_k(width):
    x = np.random.default_rng(width).normal(size=(5, width)).astype("float32")
    values, indices = _top_k(x, 6)
    expected_values, expected_indices = tf.math.top_k(x, 6)
    np.testing.assert_array_equal(values, expected_values)
    np.testing.assert_array_equal(indices, expected_indices)


def test_finished_hypotheses_are_frozen_at_eos_and_scored_as_they_are():
    model = random_model(vocab_size=6, seed=2)
    inputs = padded([[2, 3, 4], [5, 2]])
    ids, scores = (x.numpy() for x in beam_search(model, inputs,
                                                  SearchSettings(4, 0.6, extra_length=6)))
    ended = 0
    for row in range(len(inputs)):
        for beam in ids[row]:
            eos = np.flatnonzero(beam == EOS_ID)
            if eos.size:
                ended += 1
                assert (beam[eos[0] + 1:] == PAD_ID).all()
        recomputed = sequence_scores(model, inputs[row], [as_sequence(b) for b in ids[row]], 0.6)
        np.testing.assert_allclose(scores[row], recomputed, rtol=1e-4)
    assert ended >= 4  # the test saw hypotheses that ended before the limit


@pytest.mark.slow  # a search traced per batch shape: ~5 s
def test_a_batch_gives_the_same_results_as_each_example_alone():
    model = random_model(vocab_size=9, seed=3)
    rows = [[2, 3, 4, 5, 6, 7], [8], [4, 4, 4], [5, 6]]
    for beam_size in (1, 4):
        settings = SearchSettings(beam_size, 0.6, extra_length=4)
        batch_ids, batch_scores = search(model, padded(rows), settings)
        for i, row in enumerate(rows):
            ids, score = search(model, padded([row]), settings)
            assert as_sequence(batch_ids[i]) == as_sequence(ids[0])
            np.testing.assert_allclose(batch_scores[i], score[0], rtol=1e-5)


def test_beam_size_one_is_greedy_search():
    model = random_model(vocab_size=8, seed=4)
    inputs = padded([[2, 3, 4], [7, 7], [5]])
    ids, scores = search(model, inputs, SearchSettings(beam_size=1, alpha=0.6, extra_length=6))
    for row in range(len(inputs)):
        expected = reference_greedy_search(model, inputs[row], 0.6, extra_length=6)
        assert_same_hypotheses([(as_sequence(ids[row]), scores[row])], [expected])


def test_search_compiles_with_xla_to_the_same_results():
    model = random_model(vocab_size=9, seed=5, rare_eos=True)
    inputs = padded([[2, 3, 4, 5], [8, 2]])
    settings = SearchSettings(3, 0.6, 5)
    compiled = tf.function(lambda x: beam_search(model, x, settings), jit_compile=True,
                           autograph=False)
    eager_ids, eager_scores = beam_search(model, inputs, settings)
    xla_ids, xla_scores = compiled(inputs)
    np.testing.assert_array_equal(xla_ids, eager_ids)
    np.testing.assert_allclose(xla_scores, eager_scores, rtol=1e-5)


def dev_inputs(trained, count=12):
    rng = np.random.default_rng(0)
    vocabulary = trained.runner.vocabulary
    rows = [[int(s) + 2 for s in rng.integers(0, vocabulary.num_symbols, rng.integers(1, 9))]
            for _ in range(count)]
    return padded(rows)


@pytest.fixture(scope="module")
def trained_model(trained_reverse):
    return trained_reverse.runner.trainer().model


def test_cached_and_uncached_decoding_agree_on_the_trained_model(trained_reverse, trained_model):
    inputs = dev_inputs(trained_reverse)
    extra_length = trained_reverse.runner.hparams.extra_length
    uncached = tf.function(lambda x, k: search(UncachedDecoder(trained_model), x,
                                               SearchSettings(k, 0.6, extra_length)),
                           autograph=False)
    for beam_size in (1, 4):
        cached_ids, cached_scores = search(trained_model, inputs,
                                           SearchSettings(beam_size, 0.6, extra_length))
        uncached_ids, uncached_scores = uncached(inputs, beam_size)
        np.testing.assert_array_equal(cached_ids, uncached_ids)
        np.testing.assert_allclose(cached_scores, uncached_scores, rtol=1e-4)
    # The model learned the task, so agreeing is not agreeing on noise.
    reversed_ok = [as_sequence(ids)[:-1] == tuple(row[row > EOS_ID][::-1])
                   for ids, row in zip(cached_ids, inputs)]
    assert np.mean(reversed_ok) >= 0.9


def test_beam_search_equals_the_reference_on_the_trained_model(trained_reverse, trained_model):
    inputs = dev_inputs(trained_reverse, count=4)
    ids, scores = beam_search(trained_model, inputs, SearchSettings(4, 0.6, extra_length=10))
    for row in range(len(inputs)):
        expected = reference_beam_search(trained_model, inputs[row], 4, 0.6, extra_length=10)
        assert_same_hypotheses(hypotheses(ids[row], scores[row]), expected)
