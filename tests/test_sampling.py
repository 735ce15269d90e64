"""Sampling (`t2t-lite-decoder --sampling_topk/--sampling_topp/--sampling_temperature`): on a toy
model whose output distribution is known exactly, the frequencies of many samples match it and
no token outside top-k or the nucleus is ever drawn; on the trained demo model, top-k 1 and a
temperature towards 0 are greedy search, a seed repeats its samples whatever the batching, and
every sample's score is the model's own (--score of that output), on both engines."""

import itertools
import math

import numpy as np
import pytest
from cli_output import error_lines, run_cli
from keras import ops

from t2t_lite.config import EOS_ID, PAD_ID
from t2t_lite.decoding.sampling import SMALLEST_TEMPERATURE, Sampling, sample_tokens
from t2t_lite.decoding.scoring import target_score
from t2t_lite.decoding.search import SearchSettings, greedy_search

SOURCES = ["1 2 3", "4 5 6 7 0", "9 8 7 6 5 4 3 2", "", "6 2", "5", "3 3 3 1 1 1 2 2",
           "0 9 1 8 2 7", "7 7", "4 0 4 0 4"]


class MarkovModel:
    """Stands in for the Transformer in greedy_search: the next token's logits are a row of a
    table chosen by the previous token (PAD at the first step), so the probability of every
    output is a product of table entries."""

    def __init__(self, logits):
        self.logits = ops.convert_to_tensor(logits, "float32")

    def encode(self, inputs):
        return ops.zeros((ops.shape(inputs)[0], 1, 1)), ops.ones((ops.shape(inputs)[0], 1))

    def init_cache(self, memory, memory_mask, max_length):
        return {"unused": ops.zeros((ops.shape(memory)[0], 1))}

    def decode_step(self, previous, step, cache):
        return ops.take(self.logits, previous, axis=0), cache


def drawn_from(logits, sampling):
    """The distribution `sampling` draws from, computed plainly in float64: PAD removed, the
    temperature applied, then the top_k most probable tokens kept, then the smallest set of most
    probable ones whose renormalized mass reaches top_p."""
    scaled = np.array(logits, "float64") / sampling.temperature
    scaled[PAD_ID] = -np.inf
    probs = np.exp(scaled - scaled.max())
    probs /= probs.sum()
    order = np.argsort(-probs, kind="stable")
    if sampling.top_k:
        probs[order[sampling.top_k:]] = 0
        probs /= probs.sum()
    kept = np.cumsum(probs[order]) - probs[order] < sampling.top_p
    probs[order[~kept]] = 0
    return probs / probs.sum()


def exact_output_probabilities(logits, sampling, length):
    """{output tokens: probability} over every output of at most `length` tokens (ending at EOS,
    or unterminated at `length`), by enumeration."""
    table = [drawn_from(row, sampling) for row in logits]
    outputs = {}
    symbols = range(EOS_ID, len(logits))
    for n in range(1, length + 1):
        for output in itertools.product(symbols, repeat=n):
            if EOS_ID in output[:-1] or (n < length and output[-1] != EOS_ID):
                continue
            probability, previous = 1.0, PAD_ID
            for token in output:
                probability *= table[previous][token]
                previous = token
            outputs[output] = probability
    return outputs


LOGITS = np.log(np.array([  # rows: the previous token (PAD: none yet); columns: the next
    [0.30, 0.05, 0.40, 0.15, 0.07, 0.03],
    [0.25, 0.20, 0.18, 0.16, 0.12, 0.09],  # after EOS: never used
    [0.10, 0.30, 0.20, 0.25, 0.11, 0.04],
    [0.05, 0.50, 0.04, 0.06, 0.15, 0.20],
    [0.20, 0.12, 0.45, 0.05, 0.10, 0.08],
    [0.02, 0.60, 0.08, 0.13, 0.10, 0.07],
]))  # no two tokens of a row equally probable: top-k and the nucleus are then unambiguous


@pytest.mark.parametrize("sampling, as_tensors", [
    (Sampling(), False), (Sampling(temperature=0.6), False), (Sampling(top_k=2), False),
    (Sampling(top_p=0.6), False), (Sampling(top_k=3, top_p=0.8, temperature=1.7), False),
    (Sampling(top_k=2), True), (Sampling(top_k=3, top_p=0.8, temperature=1.7), True),
], ids=["plain", "temperature", "top_k", "top_p", "all", "top_k_tensors", "all_tensors"])
def test_sample_frequencies_match_the_known_distribution(sampling, as_tensors):
    """40,000 samples of a 3-token output: each output's frequency is within 4.5 standard
    deviations of its exact probability, an output of probability 0 (a token outside top-k or
    the nucleus, or PAD) is never drawn, and each sample's score is its log-probability under
    the model itself, whatever it was drawn from. The same with the settings as tensors, as the
    exported `sample` signature passes them."""
    from t2t_lite.export.signatures import Settings

    rows = 40_000
    model = MarkovModel(LOGITS)
    inputs = np.tile(np.array([[2, 3, EOS_ID]], "int32"), (rows, 1))  # limit: 3 + 0 tokens
    uniforms = Sampling(seed=sampling.seed).uniforms(range(rows), 1, 3)
    settings = sampling if not as_tensors else Settings(
        ops.convert_to_tensor(sampling.top_k, "int32"),
        ops.convert_to_tensor(sampling.top_p, "float32"),
        ops.convert_to_tensor(sampling.temperature, "float32"))
    ids, scores = greedy_search(model, inputs, SearchSettings(1, 0.0, 0, sampling=settings),
                                uniforms=uniforms)
    ids, scores = ops.convert_to_numpy(ids), ops.convert_to_numpy(scores)
    outputs = [tuple(int(t) for t in row if t != PAD_ID) for row in ids]
    expected = exact_output_probabilities(LOGITS, sampling, 3)
    assert math.isclose(sum(expected.values()), 1.0)
    counts = {output: outputs.count(output) for output in set(outputs)}
    assert set(counts) <= {output for output, p in expected.items() if p > 0}
    for output, probability in expected.items():
        sigma = math.sqrt(probability * (1 - probability) / rows)
        assert abs(counts.get(output, 0) / rows - probability) <= 4.5 * sigma + 1e-12, output
    model_log_probs = np.log(np.exp(LOGITS) / np.exp(LOGITS).sum(axis=1, keepdims=True))
    for output, score in zip(outputs[:200], scores[:200]):
        previous = (PAD_ID,) + output[:-1]
        assert score == pytest.approx(sum(model_log_probs[p, t]
                                          for p, t in zip(previous, output)), abs=1e-5)


def test_uniform_streams_are_per_line_and_extend_without_changing():
    sampling = Sampling(seed=11)
    short, long = sampling.uniforms([4, 9], 2, 5), sampling.uniforms([9, 4], 2, 8)
    np.testing.assert_array_equal(short[0:2], long[2:4, :5])
    np.testing.assert_array_equal(short[2:4], long[0:2, :5])
    assert len({tuple(row) for row in long}) == 4 and ((0 <= long) & (long < 1)).all()
    assert not np.array_equal(Sampling(seed=12).uniforms([4], 1, 5), short[:1])


@pytest.mark.parametrize("engine", ["tensorflow", "ctranslate2"])
def test_top_k_1_and_a_temperature_near_0_are_greedy_search(trained_reverse, engine):
    runner = trained_reverse.runner
    greedy = runner.translator(beam_size=1).translate(SOURCES)
    for sampling in (Sampling(top_k=1, seed=3), Sampling(temperature=1e-4, seed=3),
                     Sampling(temperature=SMALLEST_TEMPERATURE, seed=3)):
        sampled = runner.translator(engine=engine, sampling=sampling).translate(SOURCES)
        assert [t.text for t in sampled] == [t.text for t in greedy]
        np.testing.assert_allclose([t.score for t in sampled], [t.score for t in greedy],
                                   atol=1e-5)


def test_the_smallest_temperature_draws_the_best_token_of_an_unsure_distribution():
    """At float32's smallest normal temperature every draw is the most probable token, even
    where that token's log-probability is far below 0 (a flat distribution over many tokens),
    which divided by the temperature alone is -inf like every other token's (then NaNs)."""
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=0.1, size=(64, 300))
    log_probs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    assert log_probs.max() < -5  # -5 / 1.2e-38 is beyond float32: -inf
    for uniforms in (rng.random(64), np.zeros(64), np.full(64, 0.999)):
        drawn = sample_tokens(ops.convert_to_tensor(log_probs, "float32"),
                              ops.convert_to_tensor(uniforms, "float32"),
                              Sampling(temperature=SMALLEST_TEMPERATURE), impossible=-1e9)
        np.testing.assert_array_equal(ops.convert_to_numpy(drawn), log_probs.argmax(axis=-1))


def texts(samples):
    return [[t.text for t in drawn] for drawn in samples]


def sample(runner, engine, seed, batch_size=32, n=3, temperature=2.0):
    translator = runner.translator(engine=engine, batch_size=batch_size,
                                   sampling=Sampling(temperature=temperature, seed=seed))
    tokens = [runner.vocabulary.encode(source) for source in SOURCES]
    return translator, translator.translate_n_best(tokens, n)


@pytest.mark.parametrize("engine", ["tensorflow", "ctranslate2"])
def test_a_seed_repeats_its_samples_and_each_score_is_the_models(trained_reverse, engine):
    """The same seed draws the same samples (on TensorFlow also in other batches), another seed
    others; each sample's score is its log-probability by --score's teacher-forced pass,
    divided by GNMT's penalty, as beam search scores (on CTranslate2 too); an empty input has
    empty samples."""
    runner = trained_reverse.runner
    translator, samples = sample(runner, engine, seed=5)
    assert sample(runner, engine, seed=6)[1] != samples
    if engine == "ctranslate2":
        assert sample(runner, engine, seed=5)[1] == samples
    else:  # another translator, other batches: the same tokens, the scores within rounding
        rebatched = sample(runner, engine, seed=5, batch_size=3)[1]
        assert [[t.text for t in drawn] for drawn in rebatched] == texts(samples)
        np.testing.assert_allclose([[t.score for t in drawn] for drawn in rebatched],
                                   [[t.score for t in drawn] for drawn in samples], atol=1e-5)
    assert texts(samples)[3] == ["", "", ""]
    assert len({text for drawn in texts(samples) for text in drawn}) > 20
    scorer = runner.translator()
    for source, drawn in zip(SOURCES, samples):
        assert [t.score for t in drawn] == sorted((t.score for t in drawn), reverse=True)
        drawn = [t for t in drawn if t.text] if source else []
        log_probs = scorer.score_tokens(
            [runner.vocabulary.encode(source)] * len(drawn),
            [runner.vocabulary.encode_target(t.text) for t in drawn])
        limit = len(runner.vocabulary.encode(source)) + 1 + runner.hparams.extra_length
        for translation, token_log_probs in zip(drawn, log_probs):
            if len(token_log_probs) > limit:  # unterminated at its limit: no EOS to count
                token_log_probs = token_log_probs[:-1]
            assert translation.score == pytest.approx(
                target_score(token_log_probs, "gnmt", runner.hparams.alpha), abs=1e-4)


def decode(capsys, model_dir, *flags):
    from t2t_lite.cli import decoder

    return run_cli(decoder.main, [f"--model_dir={model_dir}", *flags], capsys)


def test_the_decoder_writes_n_samples_per_line_and_the_same_on_stdin(
        trained_reverse, tmp_path, capsys, monkeypatch):
    """--n_best=3 with sampling writes 3 `sample<TAB>score` lines per input, best first; one
    sample of a line is one of its 3; stdin's line N draws what the file's line N does."""
    import io

    from t2t_lite.decoding.decode import translate_stream

    sources = tmp_path / "sources.txt"
    sources.write_text("".join(f"{s}\n" for s in SOURCES))
    flags = [f"--decode_from_file={sources}", "--sampling_temperature=2", "--random_seed=9"]
    code, out, err = decode(capsys, trained_reverse.model_dir, *flags, "--n_best=3")
    assert code == 0, err
    rows = [line.split("\t") for line in out.splitlines()]
    assert len(rows) == 3 * len(SOURCES)
    for i in range(len(SOURCES)):
        scores = [float(score) for _, score in rows[3 * i: 3 * i + 3]]
        assert scores == sorted(scores, reverse=True)
    code, out, err = decode(capsys, trained_reverse.model_dir, *flags)
    one_each = out.splitlines()
    # One sample of a line is the first of its N samples (its stream number 0), listed by score.
    assert all(text in [t for t, _ in rows[3 * i: 3 * i + 3]] for i, text in enumerate(one_each))
    translator = trained_reverse.runner.translator(sampling=Sampling(temperature=2, seed=9))
    written = io.StringIO()
    translate_stream(translator, trained_reverse.runner.problem,
                     io.BytesIO("".join(f"{s}\n" for s in SOURCES).encode()), written)
    assert written.getvalue().splitlines() == one_each


@pytest.mark.parametrize("flags, message", [
    (["--random_seed=3"], "--random_seed seeds sampling: give --sampling_topk"),
    (["--sampling_topk=5", "--beam_size=4"], "--sampling_topk draws each token instead of "
     "searching: drop --beam_size"),
    (["--sampling_topp=1.5"], "--sampling_topp must be in (0, 1], got 1.5"),
    (["--sampling_temperature=0"], "--sampling_temperature must be at least 1.18e-38 (the "
     "smallest normal float32; towards 0, sampling is greedy search), got 0.0"),
    # Positive, but 0 or a denormal in float32: each division would be inf or NaN.
    (["--sampling_temperature=1e-40"], "--sampling_temperature must be at least 1.18e-38"),
    (["--sampling_temperature=1e-300"], "--sampling_temperature must be at least 1.18e-38"),
    (["--sampling_topk=-2"], "--sampling_topk must be 0 (the whole vocabulary) or positive"),
    (["--sampling_topk=2", "--random_seed=-1"], "--random_seed must be in [0, 2**32), got -1"),
    (["--engine=ctranslate2", "--n_best=2"], "--n_best needs the tensorflow or jax engine, "
     "unless sampling: CTranslate2's beam stops at the first hypotheses to end"),
])
def test_sampling_mistakes_are_one_line_errors(trained_reverse, tmp_path, capsys, flags,
                                               message):
    sources = tmp_path / "sources.txt"
    sources.write_text("1 2\n")
    code, _, err = decode(capsys, trained_reverse.model_dir, f"--decode_from_file={sources}",
                          *flags)
    errors = error_lines(err)
    assert code == 2 and len(errors) == 1 and message in errors[0], err


def test_ctranslate2_draws_from_the_same_distribution(trained_reverse):
    """The CTranslate2 engine's first tokens, 20,000 draws at temperature 3 with top-k 6 and
    top-p 0.8 (as the engine asks CTranslate2 for them), have the frequencies of the
    distribution t2t_lite draws from (computed from the model's logits above), within 4.5
    standard deviations, and none outside it: the filters are applied in the same order."""
    runner = trained_reverse.runner
    sampling = Sampling(top_k=6, top_p=0.8, temperature=3.0, seed=2)
    translator = runner.translator(engine="ctranslate2", sampling=sampling)
    source = runner.vocabulary.encode("3 1 4 1 5")
    logits = runner.restored_model()({"inputs": np.array([source + [EOS_ID]], "int32"),
                                      "targets": np.array([[EOS_ID]], "int32")})
    expected = drawn_from(ops.convert_to_numpy(logits)[0, 0], sampling)
    draws = 20_000
    tokens = translator._tokens
    results = translator._translator.translate_batch(
        [[tokens[i] for i in source]] * draws, beam_size=1, sampling_topk=6, sampling_topp=0.8,
        sampling_temperature=3.0, max_decoding_length=1, min_decoding_length=0,
        return_end_token=True, suppress_sequences=[[tokens[PAD_ID]]])
    counts = np.bincount([tokens.index(r.hypotheses[0][0]) for r in results],
                         minlength=len(expected))
    assert (counts[expected == 0] == 0).all() and (expected > 0).sum() >= 3
    sigma = np.sqrt(expected * (1 - expected) / draws)
    assert (np.abs(counts / draws - expected) <= 4.5 * sigma + 1e-12).all(), (counts, expected)


def test_a_split_sampled_at_top_k_1_scores_as_greedy_search_and_says_it_sampled(
        trained_reverse, capsys):
    """--split's summary names what decoded: sampling and its settings, not the beam."""
    code, greedy, err = decode(capsys, trained_reverse.model_dir, "--split=test", "--beam_size=1")
    assert code == 0, err
    code, sampled, err = decode(capsys, trained_reverse.model_dir, "--split=test",
                                "--sampling_topk=1", "--random_seed=3")
    assert code == 0, err
    assert "sampling (top-k 1, top-p 1.0, temperature 1.0, seed 3)" in sampled
    assert sampled.split("): ")[-1] == greedy.split("): ")[-1] and "greedy" in greedy
