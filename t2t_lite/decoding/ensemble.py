"""Ensembles: several trained models with one vocabulary decoding as one, as OpenNMT-py's and
Nematus's ensemble decoding do (a gain of about a BLEU point from a few independently trained
models is the usual finding, e.g. Sennrich et al. 2016's WMT systems).

At every step each model predicts the next token from the same prefix, and their
log-probabilities are averaged: the ensemble's distribution is the normalized geometric mean
of theirs, which the search's log-softmax renormalizes (an ensemble of a model with itself is
that model). Written in keras.ops, behind the three methods the search calls on a model
(t2t_lite.decoding.search), so that greedy and beam search, sampling and scoring run on it
unchanged, on the TensorFlow and JAX engines (CTranslate2 has no ensembles).
"""

from keras import ops

from t2t_lite.utils.errors import UserError


class Ensemble:
    """`models` (t2t_lite Transformers with one vocabulary) as one model of the search: each
    model's encoder output and decoder cache are kept, in a tuple, one per model."""

    def __init__(self, models):
        self.models = tuple(models)
        self.hparams = self.models[0].hparams
        self.vocab_size = self.models[0].vocab_size

    # The models' variables, each once (a model may be in it twice), as a Keras model lists
    # them: the JAX engine compiles with their values as arguments (JaxTranslator._run).
    @property
    def trainable_variables(self):
        return _each_once(v for model in self.models for v in model.trainable_variables)

    @property
    def non_trainable_variables(self):
        return _each_once(v for model in self.models for v in model.non_trainable_variables)

    def encode(self, inputs):
        encoded = [model.encode(inputs) for model in self.models]
        return tuple(memory for memory, _ in encoded), tuple(mask for _, mask in encoded)

    def init_cache(self, memory, memory_mask, max_length):
        return tuple(model.init_cache(x, mask, max_length)
                     for model, x, mask in zip(self.models, memory, memory_mask))

    def decode_step(self, ids, step, cache):
        steps = [model.decode_step(ids, step, model_cache)
                 for model, model_cache in zip(self.models, cache)]
        return _averaged([logits for logits, _ in steps]), tuple(c for _, c in steps)

    def __call__(self, features, training=False):
        """The teacher-forced forward pass (scoring): averaged log-probabilities, [B, T, V]."""
        return _averaged([model(features, training=training) for model in self.models])


def _each_once(variables):
    """`variables` without repeats, in order (by identity: a variable's == is elementwise)."""
    return list({id(variable): variable for variable in variables}.values())


def _averaged(logits):
    """The mean of the models' log-softmaxes of `logits`: logits of the ensemble's
    distribution, a log-softmax away from its log-probabilities."""
    log_probs = [ops.log_softmax(ops.cast(x, "float32"), axis=-1) for x in logits]
    return ops.mean(ops.stack(log_probs), axis=0)


def check_one_vocabulary(named_vocabularies):
    """Refuses (name, Vocabulary) pairs, e.g. of model_dirs, whose vocabularies are not the
    first one's token for token."""
    (first_name, first), *others = named_vocabularies
    for name, vocabulary in others:
        if vocabulary.tokens() != first.tokens():
            raise UserError(f"{name} has another vocabulary than {first_name}: an ensemble "
                            "averages the probabilities of the same tokens, so pass model_dirs "
                            "trained on one vocabulary (see datagen --vocab_from)")
