"""The exported model's scoring and sampling signatures, tf.functions over a
TensorFlowTranslator (its translating ones, `serving_default` and `translate_ids`, are the
translator's own methods, which in-process decoding runs too).

  score(sources: tf.string [batch], targets: tf.string [batch])
    -> {scores: float32 [batch], token_log_probs: float32 [batch, length],
        lengths: int32 [batch], errors: tf.string [batch]}
  score_ids(sources: int32 [batch, length], targets: int32 [batch, length]) -> the same
  sample(inputs: tf.string [batch], seed: int64, temperature: float32, top_k: int32,
         top_p: float32) -> {outputs: tf.string [batch], scores: float32 [batch],
                             errors: tf.string [batch]}

  translate_constrained(inputs: tf.string [batch], constraints: tf.string [batch, C])
    -> {outputs: tf.string [batch], scores: float32 [batch], errors: tf.string [batch],
        met: bool [batch, C]}

Scores are the decoder's --score and sampling (t2t_lite.decoding.scoring, .sampling): the
target's log-probability given the source, EOS included, and each token's (`lengths` of them
per row, the rest 0); a sample of each input, drawn at the temperature from its top_k most
probable tokens (0: all) and then its nucleus of mass top_p (1: all), with the model's
length-penalized log-probability as its score. As in the translating signatures, an item that
cannot be scored or sampled gets score 0, no output and its reason in `errors`, and the rest of
the batch is served; sampling settings out of range (a temperature below float32's smallest
normal number included) are every item's error; sources and targets of different counts are
refused. translate_constrained is the decoder's --constraints: each input's output contains its
row of target phrases ("" for none; t2t_lite.decoding.search.constrained_beam_search), best
first among the outputs that contain them all; `met` says which it contains (a phrase is missed
only by an output cut at its length limit, or by an empty input's).
"""

import collections

import tensorflow as tf

from t2t_lite.backends.tensorflow.translator import IDS, eos_terminated, id_errors
from t2t_lite.config import PAD_ID
from t2t_lite.decoding.sampling import SMALLEST_TEMPERATURE
from t2t_lite.decoding.scoring import token_log_probs
from t2t_lite.decoding.search import constrained_beam_search, greedy_search

# Sampling settings as scalar tensors, for t2t_lite.decoding.sampling.sample_tokens.
Settings = collections.namedtuple("Settings", "top_k top_p temperature")


def _strings(name):
    return tf.TensorSpec([None], tf.string, name=name)


def _scalar(dtype, name):
    return tf.TensorSpec([], dtype, name=name)


def _first_error(*errors):
    """The first non-empty reason of each item among `errors` (tf.string [batch] each)."""
    first = errors[-1]
    for reasons in reversed(errors[:-1]):
        first = tf.where(reasons != "", reasons, first)
    return first


def _without(tokens, errors):
    """Ragged ids with the rows that have an error emptied."""
    kept = errors == ""
    return tf.RaggedTensor.from_row_lengths(
        tf.ragged.boolean_mask(tokens, kept).flat_values,
        tf.where(kept, tokens.row_lengths(), tf.zeros_like(tokens.row_lengths())))


def _check_pairs(sources, targets):
    """Refuses (InvalidArgumentError) batches of sources and targets of different sizes,
    which TensorFlow would otherwise broadcast: each source is scored with its own target."""
    tf.debugging.assert_equal(
        tf.shape(sources)[0], tf.shape(targets)[0],
        message="score: the sources and targets must be pairs (as many of each)")


def _score(translator, sources, targets, errors):
    """Ragged source and target ids without EOS, and each pair's errors so far -> the `score`
    signature's outputs."""
    hparams = translator.hparams
    source_lengths, target_lengths = sources.row_lengths(), targets.row_lengths()
    longest = hparams.max_length + hparams.extra_length  # with EOS, as the decoder's --score
    errors = _first_error(
        errors,
        tf.where((source_lengths == 0) | (target_lengths == 0), "an empty source or target", ""),
        tf.where(source_lengths > translator.max_input_tokens, "the source has more than "
                 f"{translator.max_input_tokens} tokens, the most the model reads", ""),
        tf.where(target_lengths >= longest, f"the target has more than {longest - 1} tokens, "
                 "the most the model writes (max_length + extra_length - 1)", ""))
    inputs, _ = eos_terminated(_without(sources, errors))
    outputs, lengths = eos_terminated(_without(targets, errors))
    log_probs = tf.where(errors[:, None] == "",
                         token_log_probs(translator.model, inputs, outputs), 0.0)
    return {"scores": tf.reduce_sum(log_probs, axis=1), "token_log_probs": log_probs,
            "lengths": tf.where(errors == "", lengths + 1, 0), "errors": errors}


def signatures(translator):
    """{name: tf.function} of the score and translate_constrained (unless the targets are a
    parser's trees, which the in-graph vocabulary does not encode), score_ids and sample
    signatures of `translator`."""
    tokenizer, size = translator.tokenizer, translator.vocabulary.size

    def score(sources, targets):
        _check_pairs(sources, targets)
        errors = _first_error(tokenizer.errors(sources), tokenizer.errors(targets))
        sources, targets = (tf.where(errors == "", texts, "") for texts in (sources, targets))
        return _score(translator, tokenizer.encode(sources), tokenizer.encode(targets), errors)

    def score_ids(sources, targets):
        _check_pairs(sources, targets)
        errors = _first_error(id_errors(sources, size), id_errors(targets, size))
        return _score(translator, *(tf.RaggedTensor.from_tensor(ids, padding=PAD_ID)
                                    for ids in (sources, targets)), errors)

    def sample(inputs, seed, temperature, top_k, top_p):
        wrong = ~((temperature >= SMALLEST_TEMPERATURE) & (top_k >= 0) & (top_p > 0)
                  & (top_p <= 1))
        errors = _first_error(
            tf.where(tf.fill(tf.shape(inputs), wrong), "expected temperature >= "
                     f"{SMALLEST_TEMPERATURE:.3g}, top_k >= 0 and top_p in (0, 1]", ""),
            tokenizer.errors(inputs))
        texts = tf.where(errors == "", inputs, "")
        tokens, lengths = eos_terminated(
            tokenizer.encode(texts)[:, : translator.max_input_tokens])
        hparams = translator.hparams
        uniforms = tf.random.stateless_uniform(
            [tf.shape(tokens)[0], tf.shape(tokens)[1] + hparams.extra_length],
            seed=tf.stack([seed, tf.constant(0, tf.int64)]))
        drawn = translator.settings.replace(sampling=Settings(top_k, top_p, temperature))
        outputs, scores = greedy_search(translator.model, tokens, drawn, translator.constraint,
                                        translator.blank, uniforms)
        empty = lengths == 0
        outputs = tf.where(empty[:, None], PAD_ID, outputs)
        return {"outputs": translator.output_strings(texts, outputs),
                "scores": tf.where(empty, 0.0, scores), "errors": errors}

    def translate_constrained(inputs, constraints):
        tf.debugging.assert_equal(
            tf.shape(inputs)[0], tf.shape(constraints)[0],
            message="translate_constrained: one row of constraints for each input")
        phrases = tf.reshape(constraints, [-1])
        phrase_errors = tf.reduce_any(
            tf.reshape(tokenizer.errors(phrases), tf.shape(constraints)) != "", axis=1)
        errors = _first_error(tokenizer.errors(inputs), tf.where(
            phrase_errors, "a constraint the vocabulary cannot encode", ""))
        texts = tf.where(errors == "", inputs, "")
        tokens, lengths = eos_terminated(
            tokenizer.encode(texts)[:, : translator.max_input_tokens])
        phrase_ids = tokenizer.encode(tf.where(tf.reshape(tf.repeat(
            errors == "", tf.shape(constraints)[1]), [-1]), phrases, "")).to_tensor(PAD_ID)
        phrase_ids = tf.pad(phrase_ids, [[0, 0], [0, 1]])  # at least one column
        ids, scores, met = constrained_beam_search(
            translator.model, tokens, tf.reshape(phrase_ids, tf.concat(
                [tf.shape(constraints), [-1]], axis=0)), translator.settings,
            translator.constraint, translator.blank)
        empty = lengths == 0
        return {"outputs": translator.output_strings(texts, tf.where(empty[:, None], PAD_ID,
                                                                     ids[:, 0])),
                "scores": tf.where(empty, 0.0, scores[:, 0]), "errors": errors,
                "met": tf.where(empty[:, None], constraints == "", met[:, 0])}

    # Those that encode target text in-graph: not a parser's trees (score_ids takes their ids).
    target_text = {
        "score": tf.function(score, input_signature=[_strings("sources"), _strings("targets")],
                             autograph=False),
        "translate_constrained": tf.function(translate_constrained, input_signature=[
            _strings("inputs"), tf.TensorSpec([None, None], tf.string, name="constraints")],
            autograph=False)}
    if not tokenizer.encodes_targets:
        target_text = {}
    return {
        **target_text,
        "score_ids": tf.function(score_ids, input_signature=[
            tf.TensorSpec.from_spec(IDS, name="sources"),
            tf.TensorSpec.from_spec(IDS, name="targets")], autograph=False),
        "sample": tf.function(sample, input_signature=[
            _strings("inputs"), _scalar(tf.int64, "seed"), _scalar(tf.float32, "temperature"),
            _scalar(tf.int32, "top_k"), _scalar(tf.float32, "top_p")], autograph=False),
    }
