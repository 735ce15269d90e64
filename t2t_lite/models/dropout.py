"""Dropout whose rate a training run may change after its update was compiled.

A time budget chooses how much to regularize only once it has measured how many epochs the
budget allows (training.regularization), minutes into the run; by then every bucket shape's
update is compiled (tf.function, jax.jit) with the rates as constants, and compiling them again
would cost minutes of the budget. So while an update is traced, `scaled(scale)` may hold a
traced scalar (a tf.Variable on TensorFlow, an argument of the jitted function on JAX) by which
every Dropout here multiplies its rate; the value can then change between updates. Outside
`scaled`, or with None, the layer is Keras's Dropout, unchanged.
"""

import contextlib

import keras
from keras import layers, ops

# Dropout's rate after scaling stays below this, so that 1 / (1 - rate) stays finite.
MAX_RATE = 0.9

_scale = None  # set by scaled() while an update is traced


@contextlib.contextmanager
def scaled(scale):
    """While the model is called (traced) inside, every Dropout's rate is multiplied by `scale`
    (a scalar tensor or variable; None: the rates as built)."""
    global _scale
    previous, _scale = _scale, scale
    try:
        yield
    finally:
        _scale = previous


class Dropout(layers.Dropout):
    """keras.layers.Dropout whose rate `scaled` may multiply by a traced value."""

    def call(self, inputs, training=False):
        if _scale is None or not training or not self.rate:
            return super().call(inputs, training=training)
        # Keras's backend dropout takes the rate as a Python number (TensorFlow's branches on
        # it), so a traced rate is applied here: keep each value with probability 1 - rate.
        rate = ops.minimum(self.rate * ops.cast(_scale, "float32"), MAX_RATE)
        keep = 1.0 - rate
        noise = keras.random.uniform(ops.shape(inputs), seed=self.seed_generator)
        kept = ops.divide(inputs, ops.cast(keep, inputs.dtype))
        return ops.where(noise < keep, kept, ops.zeros_like(inputs))
