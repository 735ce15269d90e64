"""JaxTranslator: the Translator's Python interface (translate, n-best, sampling, scoring,
attention) on the JAX backend, with no TensorFlow: the same keras.ops search
(t2t_lite.decoding.search) compiled by jax.jit.

The model's variables are arguments of the compiled function (keras.StatelessScope maps them,
as keras-hub's generate does on JAX), not constants baked into it, so that one compilation
serves every checkpoint the trainer evaluates. XLA compiles one program per input shape, so
batches are padded to a few shapes: rows to a power of two (extra rows are empty inputs) and
length to a multiple of 8. An example's result does not depend on its batch (see search), so the
padding changes no output.
"""

import itertools

import jax
import keras
import numpy as np

from t2t_lite.config import EOS_ID, PAD_ID
from t2t_lite.decoding.alignment import pharaoh, resolve_layer
from t2t_lite.decoding.inputs import length_batches, max_input_tokens, padded
from t2t_lite.decoding.scoring import token_log_probs
from t2t_lite.decoding.search import beam_search, greedy_search, search
from t2t_lite.decoding.translation import n_best_translations
from t2t_lite.decoding.visible_ending import blank_ids
from t2t_lite.utils.errors import UserError

_LENGTH_MULTIPLE = 8


def _padded_shape(rows, length):
    """The compiled shape a batch of `rows` rows of `length` ids is padded to."""
    return 1 << max(rows - 1, 0).bit_length(), -(-length // _LENGTH_MULTIPLE) * _LENGTH_MULTIPLE


def pad_batch(ids):
    """int32 [rows, length] EOS-terminated inputs -> the same in _padded_shape, extra rows
    holding only EOS (an empty input) and extra columns PAD."""
    rows, length = _padded_shape(*ids.shape)
    out = np.full((rows, length), PAD_ID, "int32")
    out[:, 0] = EOS_ID
    out[: ids.shape[0], : ids.shape[1]] = ids
    return out


class JaxTranslator:
    """Translates with `model` (a Keras model on the JAX backend) and `vocabulary` by the
    decoding hparams, as t2t_lite.backends.tensorflow.translator.Translator does (its docstring
    says how); a problem's `constraint` and `sampling` as there."""

    def __init__(self, model, vocabulary, hparams, batch_size=32, constraint=None,
                 sampling=None):
        if keras.config.backend() != "jax":
            raise UserError("the jax engine needs Keras on JAX: set KERAS_BACKEND=jax")
        self.model = model
        self.vocabulary = vocabulary
        self.hparams = hparams
        self.batch_size = batch_size
        self.max_input_tokens = max_input_tokens(hparams)
        self.constraint = constraint
        self.sampling = sampling
        self.blank = blank_ids(vocabulary) if hparams.min_length >= 1 else ()
        self._compiled = {}

    def _run(self, name, function, *arrays):
        """function(*arrays) compiled once per `name` (and per shape) with the model's current
        variable values as arguments; returns numpy arrays."""
        if name not in self._compiled:
            model = self.model

            def stateless(state, *arrays):
                trainable, non_trainable = state
                mapping = itertools.chain(zip(model.trainable_variables, trainable),
                                          zip(model.non_trainable_variables, non_trainable))
                with keras.StatelessScope(state_mapping=mapping):
                    return function(*arrays)

            self._compiled[name] = jax.jit(stateless)
        state = ([v.value for v in self.model.trainable_variables],
                 [v.value for v in self.model.non_trainable_variables])
        return jax.tree.map(np.asarray, self._compiled[name](state, *arrays))

    def is_truncated(self, tokens):
        """Whether translating `tokens` (ids without EOS) will drop some of them."""
        return len(tokens) > self.max_input_tokens

    def translate(self, texts):
        """[str] -> [Translation], in the same order."""
        return self.translate_tokens([self.vocabulary.encode(text) for text in texts])

    def translate_tokens(self, token_lists, progress=None, line_numbers=None):
        """[[id]] without EOS -> [Translation], in the same order (see Translator)."""
        return [best[0] for best in self.translate_n_best(token_lists, 1, progress,
                                                          line_numbers)]

    def translate_n_best(self, token_lists, n, progress=None, line_numbers=None):
        """[[id]] without EOS -> [[Translation] * n], best first (see Translator): beam
        search's n best, or with sampling n samples of each line."""
        h = self.hparams
        if self.sampling:
            numbers = line_numbers or range(1, len(token_lists) + 1)
            return self._search_nonempty(token_lists, n, progress,
                                         lambda indices, inputs: self._draw(
                                             n, [numbers[i] for i in indices], inputs))
        if n > 1 and n > h.beam_size:
            raise UserError(f"--n_best={n} needs --beam_size={n} or more: the beam holds the "
                            "hypotheses")

        def best(inputs):
            if n == 1:
                ids, scores = search(self.model, inputs, h.beam_size, h.alpha, h.extra_length,
                                     self.constraint, h.min_length, self.blank)
                return ids[:, None], scores[:, None]
            return beam_search(self.model, inputs, h.beam_size, h.alpha, h.extra_length,
                               self.constraint, h.min_length, self.blank)

        return self._search_nonempty(
            token_lists, n, progress,
            lambda indices, inputs: self._run(f"search{min(n, 2)}", best, pad_batch(inputs)))

    def _draw(self, n, numbers, inputs):
        """(ids [rows, n, length], scores [rows, n]): n samples of each row of `inputs`."""
        h = self.hparams
        repeated = pad_batch(np.repeat(inputs, n, axis=0))
        uniforms = np.zeros((repeated.shape[0], repeated.shape[1] + h.extra_length), "float32")
        uniforms[: len(numbers) * n] = self.sampling.uniforms(numbers, n, uniforms.shape[1])
        ids, scores = self._run("sample", lambda inputs, uniforms: greedy_search(
            self.model, inputs, h.extra_length, h.alpha, self.constraint, self.sampling,
            uniforms, h.min_length, self.blank), repeated, uniforms)
        rows = len(numbers)
        return ids[: rows * n].reshape(rows, n, -1), scores[: rows * n].reshape(rows, n)

    def _search_nonempty(self, token_lists, n, progress, search_batch):
        return n_best_translations(token_lists, n, search_batch, self.vocabulary,
                                   self.batch_size, self.max_input_tokens, progress)

    def score_tokens(self, source_lists, target_lists, progress=None):
        """[[id]] sources and targets without EOS -> [float32 [len(target) + 1]] (see
        Translator.score_tokens)."""
        results = [None] * len(source_lists)
        for chunk in length_batches(source_lists, self.batch_size):
            inputs = pad_batch(padded([source_lists[i] for i in chunk], eos=True))
            targets = padded([target_lists[i] for i in chunk], eos=True)
            targets = np.pad(targets, ((0, inputs.shape[0] - len(chunk)),
                                       (0, _padded_shape(1, targets.shape[1])[1]
                                        - targets.shape[1])))
            log_probs = self._run("score", lambda inputs, targets: token_log_probs(
                self.model, inputs, targets), inputs, targets)
            for i, row in zip(chunk, log_probs):
                results[i] = row[: len(target_lists[i]) + 1]
            if progress:
                progress.update(len(chunk))
        return results

    def alignments(self, source_lists, target_lists, layer=None):
        """As Translator.alignments: the Pharaoh alignment of each target to its source."""
        from t2t_lite.decoding.attention import attention_weights

        layer = resolve_layer(layer, self.hparams.num_decoder_layers)
        return [pharaoh(attention.encoder_decoder[layer].mean(axis=0)[:-1, :-1])
                for attention in attention_weights(self, source_lists, target_lists)]
