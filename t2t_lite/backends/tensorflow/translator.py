"""Translator: text -> ids -> search -> text, the one path of the decoder, the trainer's decoding
evaluation and the exported model.

All three run the same in-graph step, `translate_ids`: truncate each input to max_length tokens
with its EOS, search, and give empty inputs empty outputs. Python callers tokenize with
`Vocabulary.encode`/`decode`; the exported signature with the vocabulary's in-graph twin.
"""

import functools

import numpy as np
import tensorflow as tf

from t2t_lite.config import EOS_ID, PAD_ID
from t2t_lite.backends.tensorflow.vocabulary import tf_strip_mask
from t2t_lite.decoding.alignment import pharaoh, resolve_layer
from t2t_lite.decoding.inputs import length_batches, max_input_tokens, padded
from t2t_lite.decoding.scoring import token_log_probs
from t2t_lite.decoding.search import beam_search, greedy_search, search
from t2t_lite.decoding.translation import Translation, n_best_translations
from t2t_lite.decoding.visible_ending import blank_ids
from t2t_lite.utils.errors import UserError

IDS = tf.TensorSpec([None, None], tf.int32, name="inputs")  # a batch of ids of any shape
TARGET_IDS = tf.TensorSpec([None, None], tf.int32, name="targets")
UNIFORMS = tf.TensorSpec([None, None], tf.float32, name="uniforms")


class Translator(tf.Module):
    """Translates with `model` and `vocabulary` by the decoding hparams (beam_size, alpha,
    extra_length, min_length) and the input limit max_length.

    Scores are the length-penalized log-probabilities of the outputs (see
    t2t_lite.decoding.search); an empty input has the empty output and score 0. A tf.Module, so
    that saving it saves the model and the vocabulary's in-graph tokenizer with its signatures.

    At min_length 1 or more no output ends with a token that shows no text (`blank`, its ids;
    t2t_lite.decoding.visible_ending), so none is empty. A problem may add its own search
    `constraint` (see t2t_lite.decoding.search; parsing: well-formed trees),
    and `tf_postprocess`, the in-graph twin of its Problem.postprocess that the text signature
    applies: (sources tf.string [batch], output ids [batch, length]) -> tf.string [batch].

    With `sampling` (t2t_lite.decoding.sampling.Sampling), translate_tokens and translate_n_best
    draw samples instead of searching; the exported signatures search (sampling is their own
    `sample` signature, t2t_lite.export.signatures). `model` may be a decoding.ensemble.Ensemble.
    """

    def __init__(self, model, vocabulary, hparams, batch_size=32, constraint=None,
                 tf_postprocess=None, sampling=None):
        super().__init__()
        self.model = model
        self.vocabulary = vocabulary
        self.tokenizer = vocabulary.in_graph()  # tracked, so that an export saves it
        self.hparams = hparams
        self.batch_size = batch_size
        self.max_input_tokens = max_input_tokens(hparams)
        self.tf_postprocess = tf_postprocess
        self.blank = blank_ids(vocabulary) if hparams.min_length >= 1 else ()
        # One trace for every batch shape ([None, None]); no AutoGraph, as the search is
        # keras.ops with an explicit while_loop (it runs on JAX too): converting its source was
        # most of the first translation's time (benchmarks/first_translation.py). Not
        # jit_compile: XLA would compile anew for every input shape, and its gain on CPU is
        # small and load-dependent (benchmarks/RESULTS.md).
        self._search = tf.function(
            lambda inputs: search(model, inputs, hparams.beam_size, hparams.alpha,
                                  hparams.extra_length, constraint, hparams.min_length,
                                  self.blank),
            input_signature=[IDS], autograph=False)
        self.constraint = constraint
        self.sampling = sampling
        self._n_best_search = None
        self._sample = None
        self._score = None

    def is_truncated(self, tokens):
        """Whether translating `tokens` (ids without EOS) will drop some of them."""
        return len(tokens) > self.max_input_tokens

    def translate(self, texts):
        """[str] -> [Translation], in the same order."""
        return self.translate_tokens([self.vocabulary.encode(text) for text in texts])

    def translate_tokens(self, token_lists, progress=None, line_numbers=None):
        """[[id]] without EOS -> [Translation], in the same order; translated in batches of
        similar length so that little of the search is spent on padding. `progress` (a
        utils.progress.Progress) counts the lines done. With sampling, each is a sample drawn
        by the stream of its line number (line_numbers, default 1, 2, ...)."""
        if self.sampling:
            return [samples[0] for samples in self.translate_n_best(token_lists, 1, progress,
                                                                   line_numbers)]
        results = [None] * len(token_lists)
        for chunk, ids in self.batches(token_lists):
            self.collect(results, chunk, self.translate_ids(ids))
            if progress:
                progress.update(len(chunk))
        return results

    def batches(self, token_lists):
        """(indices, PAD-padded ids [len(indices), length]) of `token_lists` in batches of
        similar length, each list truncated to max_input_tokens."""
        for chunk in length_batches(token_lists, self.batch_size):
            yield chunk, padded([token_lists[i][: self.max_input_tokens] for i in chunk])

    def collect(self, results, chunk, translated):
        """Puts translate_ids' output for the batch of indices `chunk` into `results`."""
        for i, output, score in zip(chunk, translated["outputs"].numpy(),
                                    translated["scores"].numpy()):
            results[i] = Translation(self.vocabulary.decode(output), float(score))

    def translate_n_best(self, token_lists, n, progress=None, line_numbers=None):
        """[[id]] without EOS -> [[Translation] * n]: beam search's n best finished hypotheses
        of each input, best first, the first as translate_tokens gives it; with sampling, n
        samples of each, drawn by the streams of its line number (line_numbers, default 1, 2,
        ...), best first. An empty input has n empty outputs of score 0."""
        if self.sampling:
            return self._search_nonempty(token_lists, n, progress, functools.partial(
                self._draw, n, line_numbers or range(1, len(token_lists) + 1)))
        if n == 1:
            return [[translation]
                    for translation in self.translate_tokens(token_lists, progress)]
        if n > self.hparams.beam_size:
            raise UserError(f"--n_best={n} needs --beam_size={n} or more: the beam holds the "
                            "hypotheses")
        if self._n_best_search is None:
            self._n_best_search = tf.function(  # traced once, as _search is
                lambda inputs: beam_search(self.model, inputs, self.hparams.beam_size,
                                           self.hparams.alpha, self.hparams.extra_length,
                                           self.constraint, self.hparams.min_length,
                                           self.blank),
                input_signature=[IDS], autograph=False)
        return self._search_nonempty(token_lists, n, progress,
                                     lambda indices, inputs: self._n_best_search(inputs))

    def _draw(self, n, line_numbers, indices, inputs):
        """(ids [batch, n, length], scores [batch, n]): n samples of each row of `inputs`, the
        inputs of token_lists[indices]."""
        if self._sample is None:
            self._sample = tf.function(  # traced once, as _search is
                lambda inputs, uniforms: greedy_search(
                    self.model, inputs, self.hparams.extra_length, self.hparams.alpha,
                    self.constraint, self.sampling, uniforms, self.hparams.min_length,
                    self.blank),
                input_signature=[IDS, UNIFORMS], autograph=False)
        uniforms = self.sampling.uniforms([line_numbers[i] for i in indices], n,
                                          inputs.shape[1] + self.hparams.extra_length)
        outputs, scores = self._sample(np.repeat(inputs, n, axis=0), uniforms)
        return (tf.reshape(outputs, [len(indices), n, -1]), tf.reshape(scores, [-1, n]))

    def _search_nonempty(self, token_lists, n, progress, search_batch):
        return n_best_translations(token_lists, n, search_batch, self.vocabulary,
                                   self.batch_size, self.max_input_tokens, progress)

    def score_tokens(self, source_lists, target_lists, progress=None):
        """[[id]] sources and their [[id]] targets, without EOS -> [float32 [len(target) + 1]]:
        the log-probability of each target token given the source and the tokens before it,
        EOS's last (t2t_lite.decoding.scoring). Sources must fit max_input_tokens."""
        if self._score is None:
            self._score = tf.function(  # traced once, as _search is
                lambda inputs, targets: token_log_probs(self.model, inputs, targets),
                input_signature=[IDS, TARGET_IDS], autograph=False)
        results = [None] * len(source_lists)
        for chunk in length_batches(source_lists, self.batch_size):
            log_probs = self._score(padded([source_lists[i] for i in chunk], eos=True),
                                    padded([target_lists[i] for i in chunk], eos=True))
            for i, row in zip(chunk, log_probs.numpy()):
                results[i] = row[: len(target_lists[i]) + 1]
            if progress:
                progress.update(len(chunk))
        return results

    def alignments(self, source_lists, target_lists, layer=None):
        """[[id]] sources and their [[id]] targets, without EOS -> the Pharaoh alignment of
        each target to its source by the heads of decoder layer `layer` (default: the
        penultimate; see t2t_lite.decoding.alignment), from one teacher-forced pass."""
        from t2t_lite.decoding.attention import attention_weights

        layer = resolve_layer(layer, self.hparams.num_decoder_layers)
        return [pharaoh(attention.encoder_decoder[layer].mean(axis=0)[:-1, :-1])
                for attention in attention_weights(self, source_lists, target_lists)]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def translate_strings(self, texts):
        """tf.string [batch] -> {"outputs": tf.string [batch], "scores": float32 [batch],
        "errors": tf.string [batch]}. An item the vocabulary cannot encode (invalid UTF-8, or
        a token that is not a symbol) is translated as an empty one, with the reason in
        "errors" ("" for the others), so that it does not fail the rest of the batch."""
        errors = self.tokenizer.errors(texts)
        texts = tf.where(errors == "", texts, "")
        outputs, scores = self._translate(self.tokenizer.encode(texts))
        return {"outputs": self.output_strings(texts, outputs), "scores": scores,
                "errors": errors}

    def output_strings(self, texts, outputs):
        """The text of each output (ids [batch, length]) of the tf.string `texts`, in-graph and
        postprocessed by the problem."""
        if self.tf_postprocess is not None:
            return self.tf_postprocess(texts, outputs)
        return self.tokenizer.decode(outputs)

    @tf.function(input_signature=[IDS], autograph=False)
    def translate_ids(self, ids):
        """ids [batch, length] without EOS, PAD-padded -> {"outputs": ids [batch, length'] without
        EOS, PAD-padded; "scores": float32 [batch]}."""
        outputs, scores = self._translate(tf.RaggedTensor.from_tensor(ids, padding=PAD_ID))
        kept = tf_strip_mask(outputs)
        longest = tf.reduce_max(tf.reduce_sum(tf.cast(kept, tf.int32), axis=1))
        return {"outputs": tf.where(kept, outputs, PAD_ID)[:, :longest], "scores": scores}

    @tf.function(input_signature=[IDS], autograph=False)
    def serve_ids(self, ids):
        """translate_ids for clients (the SavedModel's `translate_ids`), with "errors":
        tf.string [batch] as translate_strings has. A row that is not token ids (an id outside
        the vocabulary, EOS, which the model adds, or padding before the end) is translated as
        an empty one with its reason, so that it does not fail the rest of the batch."""
        errors = id_errors(ids, self.vocabulary.size)
        translated = self.translate_ids(tf.where(errors[:, None] == "", ids, PAD_ID))
        return {**translated, "errors": errors}

    def _translate(self, tokens):
        """Ragged ids [batch, None] without EOS -> (ids [batch, length], scores [batch])."""
        inputs, lengths = eos_terminated(tokens[:, : self.max_input_tokens])
        outputs, scores = self._search(inputs)
        empty = lengths == 0
        return tf.where(empty[:, None], PAD_ID, outputs), tf.where(empty, 0.0, scores)


def eos_terminated(tokens):
    """Ragged ids [batch, None] without EOS -> (int32 [batch, longest + 1], each row's ids, EOS
    and PAD; int32 [batch], the rows' lengths without EOS)."""
    tokens = tf.cast(tokens, tf.int32)
    lengths = tf.cast(tokens.row_lengths(), tf.int32)
    ids = tf.pad(tokens.to_tensor(PAD_ID), [[0, 0], [0, 1]])
    # EOS after each row's tokens (a ragged concat logs a oneDNN int64 error on CPU).
    positions = tf.range(tf.shape(ids)[1])[None, :]
    return tf.where(positions == lengths[:, None], EOS_ID, ids), lengths


def id_errors(ids, size):
    """int32 [batch, length] from a client -> tf.string [batch]: why a row is not token ids of a
    vocabulary of `size` (an id outside it, EOS, which the model adds, or padding before the
    end), "" for a good row."""
    out_of_range = (ids < 0) | (ids >= size) | (ids == EOS_ID)
    padding_seen = tf.cumsum(tf.cast(ids == PAD_ID, tf.int32), axis=1) > 0
    bad = tf.reduce_any(out_of_range | (padding_seen & (ids != PAD_ID)), axis=1)
    return tf.where(bad, f"expected token ids 2..{size - 1} without EOS, then padding (0)", "")
