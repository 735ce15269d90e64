"""JaxTranslator: the JAX engine's Translator (t2t_lite.decoding.translator: translate, n-best,
sampling, scoring, attention), with no TensorFlow: the same keras.ops search
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
from t2t_lite.decoding.scoring import token_log_probs
from t2t_lite.decoding.search import (beam_search, constrained_beam_search, greedy_search,
                                      search)
from t2t_lite.decoding.translator import Translator
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


class JaxTranslator(Translator):
    """The Translator (t2t_lite.decoding.translator) of the JAX engine: `model` is a Keras
    model on the JAX backend, or an ensemble of them (decoding.ensemble.Ensemble)."""

    def __init__(self, model, vocabulary, hparams, batch_size=32, constraint=None,
                 sampling=None):
        if keras.config.backend() != "jax":
            raise UserError("the jax engine needs Keras on JAX: set KERAS_BACKEND=jax")
        super().__init__(model, vocabulary, hparams, batch_size, constraint, sampling)
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

    def _run_search(self, inputs):
        return self._run("search", lambda inputs: search(
            self.model, inputs, self.settings, self.constraint, self.blank), pad_batch(inputs))

    def _run_beam(self, inputs):
        return self._run("beam", lambda inputs: beam_search(
            self.model, inputs, self.settings, self.constraint, self.blank), pad_batch(inputs))

    def _run_constrained(self, inputs, phrases):
        """Padded as pad_batch pads, the phrases' count and length to powers of two (extra
        rows and phrases are PAD: none)."""
        padded_inputs = pad_batch(inputs)
        rows, count, longest = phrases.shape
        padded_phrases = np.zeros((padded_inputs.shape[0], 1 << (count - 1).bit_length(),
                                   1 << (longest - 1).bit_length()), "int32")
        padded_phrases[:rows, :count, :longest] = phrases
        return self._run("constrained", lambda inputs, phrases: constrained_beam_search(
            self.model, inputs, phrases, self.settings, self.constraint, self.blank),
            padded_inputs, padded_phrases)

    def _run_sample(self, inputs, uniforms):
        """Padded as pad_batch pads; the uniforms of padded positions are 0 and never read: a
        row stops at its limit, which an unpadded batch holds."""
        padded_inputs = pad_batch(inputs)
        padded_uniforms = np.zeros((padded_inputs.shape[0],
                                    padded_inputs.shape[1] + self.settings.extra_length),
                                   "float32")
        padded_uniforms[: uniforms.shape[0], : uniforms.shape[1]] = uniforms
        return self._run("sample", lambda inputs, uniforms: greedy_search(
            self.model, inputs, self.sample_settings, self.constraint, self.blank, uniforms),
            padded_inputs, padded_uniforms)

    def _run_score(self, inputs, targets):
        inputs = pad_batch(inputs)
        targets = np.pad(targets, ((0, inputs.shape[0] - targets.shape[0]),
                                   (0, _padded_shape(1, targets.shape[1])[1]
                                    - targets.shape[1])))
        return self._run("score", lambda inputs, targets: token_log_probs(
            self.model, inputs, targets), inputs, targets)
