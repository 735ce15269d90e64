"""A model's weights restored from a checkpoint of either trainer, on any backend that can read
it: the JAX trainer's (P.weights.h5, Keras's own format, read on every backend) or the
TensorFlow trainer's (a tf.train.Checkpoint, read only with TensorFlow)."""

import os
import re

import keras

from t2t_lite.model_dir import KERAS_WEIGHTS as WEIGHTS
from t2t_lite.training.checkpoint_list import CheckpointGone
from t2t_lite.utils.errors import UserError


def is_keras_checkpoint(path):
    return os.path.exists(path + WEIGHTS)


def check_resumable(path, backend):
    """Fails unless the trainer of `backend` can resume from checkpoint `path`: each trainer
    reads only its own optimizer state."""
    keras_checkpoint = is_keras_checkpoint(path)
    if keras_checkpoint != (backend == "jax"):
        writer = "jax" if keras_checkpoint else "tensorflow"
        raise UserError(f"{path} is a checkpoint of the {writer} trainer, which only it can "
                        f"resume: run the trainer with KERAS_BACKEND={writer}")


def restore_model(model, path, hparams_path="its hparams.json"):
    """Loads the weights of checkpoint `path` (an existing prefix) into `model` (built, by the
    hparams at hparams_path); another model's weights (other shapes or layers) are a
    UserError saying so."""
    try:
        if is_keras_checkpoint(path):
            try:
                model.load_weights(path + WEIGHTS)
            except FileNotFoundError:
                raise CheckpointGone(path) from None
            return
        if keras.config.backend() != "tensorflow":
            raise UserError(f"{path} is a checkpoint of the TensorFlow trainer, which only "
                            "TensorFlow reads: decode it with KERAS_BACKEND=tensorflow")
        from t2t_lite.backends.tensorflow.checkpoints import restore_model_weights

        restore_model_weights(model, path)
    except (AssertionError, ValueError) as error:  # missing weights, or other shapes
        shapes = re.search(r"tensor with shape (\([^)]*\)) .* variable with shape "
                           r"(\([^)]*\))", str(error))
        cause = (f" (a tensor of shape {shapes[1]} where the model has {shapes[2]})"
                 if shapes else "")
        raise UserError(f"{path} does not hold the weights of the model in {hparams_path}"
                        f"{cause}: it is another model's; pass the --model_dir it was trained "
                        "in") from None
