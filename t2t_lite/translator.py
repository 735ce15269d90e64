"""Translator: text -> ids -> search -> text, the one path of the decoder, the trainer's decoding
evaluation and the exported model.

All three run the same in-graph step, `translate_ids`: truncate each input to max_length tokens
with its EOS, search, and give empty inputs empty outputs. Python callers tokenize with
`Vocabulary.encode`/`decode`; the exported signature with `tf_encode`/`tf_decode`.
"""

import collections

import numpy as np
import tensorflow as tf

from t2t_lite.decoding import search
from t2t_lite.text import EOS_ID, PAD_ID, tf_strip_mask

Translation = collections.namedtuple("Translation", "text score")


class Translator(tf.Module):
    """Translates with `model` and `vocabulary` by the decoding hparams (beam_size, alpha,
    extra_length) and the input limit max_length.

    Scores are the length-penalized log-probabilities of the outputs (see t2t_lite.decoding); an
    empty input has the empty output and score 0. A tf.Module, so that saving it saves the model
    and the vocabulary's in-graph tokenizer with its signatures.
    """

    def __init__(self, model, vocabulary, hparams, batch_size=32):
        super().__init__()
        self.model = model
        self.vocabulary = vocabulary
        self.hparams = hparams
        self.batch_size = batch_size
        self.max_input_tokens = hparams.max_length - 1  # and EOS
        # Not jit_compile: XLA would compile anew for every input shape, and its gain on CPU
        # is small and load-dependent (benchmarks/RESULTS.md).
        self._search = tf.function(
            lambda inputs: search(model, inputs, hparams.beam_size, hparams.alpha,
                                  hparams.extra_length))

    def is_truncated(self, tokens):
        """Whether translating `tokens` (ids without EOS) will drop some of them."""
        return len(tokens) > self.max_input_tokens

    def translate(self, texts):
        """[str] -> [Translation], in the same order."""
        return self.translate_tokens([self.vocabulary.encode(text) for text in texts])

    def translate_tokens(self, token_lists):
        """[[id]] without EOS -> [Translation], in the same order; translated in batches of
        similar length so that little of the search is spent on padding."""
        order = sorted(range(len(token_lists)), key=lambda i: len(token_lists[i]))
        results = [None] * len(token_lists)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            rows = [token_lists[i][: self.max_input_tokens] for i in chunk]
            ids = np.full((len(rows), max(map(len, rows))), PAD_ID, "int32")
            for row, tokens in zip(ids, rows):
                row[: len(tokens)] = tokens
            translated = self.translate_ids(ids)
            for i, output, score in zip(chunk, translated["outputs"].numpy(),
                                        translated["scores"].numpy()):
                results[i] = Translation(self.vocabulary.decode(output), float(score))
        return results

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def translate_strings(self, texts):
        """tf.string [batch] -> {"outputs": tf.string [batch], "scores": float32 [batch],
        "errors": tf.string [batch]}. An item the vocabulary cannot encode (invalid UTF-8, or
        a token that is not a symbol) is translated as an empty one, with the reason in
        "errors" ("" for the others), so that it does not fail the rest of the batch."""
        errors = self.vocabulary.tf_errors(texts)
        texts = tf.where(errors == "", texts, "")
        outputs, scores = self._translate(self.vocabulary.tf_encode(texts))
        return {"outputs": self.vocabulary.tf_decode(outputs), "scores": scores,
                "errors": errors}

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="inputs")])
    def translate_ids(self, ids):
        """ids [batch, length] without EOS, PAD-padded -> {"outputs": ids [batch, length'] without
        EOS, PAD-padded; "scores": float32 [batch]}."""
        outputs, scores = self._translate(tf.RaggedTensor.from_tensor(ids, padding=PAD_ID))
        kept = tf_strip_mask(outputs)
        longest = tf.reduce_max(tf.reduce_sum(tf.cast(kept, tf.int32), axis=1))
        return {"outputs": tf.where(kept, outputs, PAD_ID)[:, :longest], "scores": scores}

    def _translate(self, tokens):
        """Ragged ids [batch, None] without EOS -> (ids [batch, length], scores [batch])."""
        tokens = tf.cast(tokens[:, : self.max_input_tokens], tf.int32)
        lengths = tf.cast(tokens.row_lengths(), tf.int32)
        inputs = tf.pad(tokens.to_tensor(PAD_ID), [[0, 0], [0, 1]])
        # EOS after each row's tokens (a ragged concat logs a oneDNN int64 error on CPU).
        positions = tf.range(tf.shape(inputs)[1])[None, :]
        inputs = tf.where(positions == lengths[:, None], EOS_ID, inputs)
        outputs, scores = self._search(inputs)
        empty = lengths == 0
        return tf.where(empty[:, None], PAD_ID, outputs), tf.where(empty, 0.0, scores)
