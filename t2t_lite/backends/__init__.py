"""Keras's backends, each a wing behind one interface (base.Backend), chosen once from
KERAS_BACKEND (or keras.json) by current(): TensorFlow is imported only in backends/tensorflow/
(and the SavedModel export), JAX only in backends/jax/."""

import functools

from t2t_lite.utils.backend import keras_backend
from t2t_lite.utils.errors import UserError


@functools.cache
def current():
    """The Backend of the Keras backend this process runs."""
    name = keras_backend()
    if name == "tensorflow":
        from t2t_lite.backends.tensorflow.backend import TensorFlowBackend

        return TensorFlowBackend()
    if name == "jax":
        from t2t_lite.backends.jax.backend import JaxBackend

        return JaxBackend()
    raise UserError(f"Keras runs on {name}, which t2t_lite does not support: set "
                    "KERAS_BACKEND=tensorflow or KERAS_BACKEND=jax")
