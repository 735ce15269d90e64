"""TensorFlowTranslator: the TensorFlow engine's translator, the one path of the decoder, the
trainer's decoding evaluation and the exported model.

All three run the same in-graph step, `translate_ids`: truncate each input to max_length tokens
with its EOS, search, and give empty inputs empty outputs. Python callers tokenize with
`Vocabulary.encode`/`decode`; the exported signature with the vocabulary's in-graph twin. What
it shares with the JAX engine (batching, n-best, sampling, scoring, alignments) is
t2t_lite.decoding.translator.Translator's; this wing compiles the steps as tf.functions.
"""

import tensorflow as tf

from t2t_lite.config import EOS_ID, PAD_ID
from t2t_lite.backends.tensorflow.vocabulary import tf_strip_mask
from t2t_lite.decoding.inputs import length_batches, padded
from t2t_lite.decoding.scoring import token_log_probs
from t2t_lite.decoding.search import (beam_search, constrained_beam_search, greedy_search,
                                      search)
from t2t_lite.decoding.translation import Translation
from t2t_lite.decoding.translator import Translator

IDS = tf.TensorSpec([None, None], tf.int32, name="inputs")  # a batch of ids of any shape
TARGET_IDS = tf.TensorSpec([None, None], tf.int32, name="targets")
UNIFORMS = tf.TensorSpec([None, None], tf.float32, name="uniforms")
PHRASES = tf.TensorSpec([None, None, None], tf.int32, name="phrases")


class TensorFlowTranslator(Translator, tf.Module):
    """The Translator (t2t_lite.decoding.translator) of the TensorFlow engine: a tf.Module, so
    that saving it saves the model and the vocabulary's in-graph tokenizer with its signatures.

    `tf_postprocess` is the in-graph twin of the problem's Problem.postprocess that the text
    signature applies: (sources tf.string [batch], output ids [batch, length]) -> tf.string
    [batch]. The exported signatures search; sampling is their own `sample` signature
    (t2t_lite.export.signatures).
    """

    def __init__(self, model, vocabulary, hparams, batch_size=32, constraint=None,
                 tf_postprocess=None, sampling=None):
        tf.Module.__init__(self)
        Translator.__init__(self, model, vocabulary, hparams, batch_size, constraint, sampling)
        self.tokenizer = vocabulary.in_graph()  # tracked, so that an export saves it
        self.tf_postprocess = tf_postprocess
        # One trace for every batch shape ([None, None]); no AutoGraph, as the search is
        # keras.ops with an explicit while_loop (it runs on JAX too): converting its source was
        # most of the first translation's time (benchmarks/first_translation.py). Not
        # jit_compile: XLA would compile anew for every input shape, and its gain on CPU is
        # small and load-dependent (benchmarks/RESULTS.md).
        self._search = tf.function(
            lambda inputs: search(model, inputs, self.settings, constraint, self.blank),
            input_signature=[IDS], autograph=False)
        self._n_best_search = None
        self._sample = None
        self._score = None
        self._constrained = None

    def _translate_best(self, token_lists, progress):
        """Through translate_ids, the exported step, in batches of similar length."""
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

    def _run_search(self, inputs):
        return self._search(inputs)

    def _run_beam(self, inputs):
        if self._n_best_search is None:
            self._n_best_search = tf.function(  # traced once, as _search is
                lambda inputs: beam_search(self.model, inputs, self.settings, self.constraint,
                                           self.blank),
                input_signature=[IDS], autograph=False)
        return self._n_best_search(inputs)

    def _run_sample(self, inputs, uniforms):
        if self._sample is None:
            self._sample = tf.function(  # traced once, as _search is
                lambda inputs, uniforms: greedy_search(
                    self.model, inputs, self.sample_settings, self.constraint, self.blank,
                    uniforms),
                input_signature=[IDS, UNIFORMS], autograph=False)
        return self._sample(inputs, uniforms)

    def _run_score(self, inputs, targets):
        if self._score is None:
            self._score = tf.function(  # traced once, as _search is
                lambda inputs, targets: token_log_probs(self.model, inputs, targets),
                input_signature=[IDS, TARGET_IDS], autograph=False)
        return self._score(inputs, targets)

    def _run_constrained(self, inputs, phrases):
        if self._constrained is None:
            self._constrained = tf.function(  # traced once, as _search is
                lambda inputs, phrases: constrained_beam_search(
                    self.model, inputs, phrases, self.settings, self.constraint, self.blank),
                input_signature=[IDS, PHRASES], autograph=False)
        return self._constrained(inputs, phrases)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")],
                 autograph=False)  # plain TF ops, as every step (benchmarks/export_time.py)
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
