"""A model's weights restored from a checkpoint of either trainer, on any backend that can read
it: the JAX trainer's (P.weights.h5, Keras's own format, read on every backend) or the
TensorFlow trainer's (a tf.train.Checkpoint, read only with TensorFlow)."""

import os
import re
import zipfile
import zlib

import keras
import numpy as np

from t2t_lite.model_dir import KERAS_WEIGHTS as WEIGHTS
from t2t_lite.training.checkpoint_list import CheckpointGone, DamagedCheckpoint
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import file_crc32

# A Keras checkpoint's second file (the JAX trainer's: t2t_lite.backends.jax.checkpoints),
# which records the CRC-32 of the first: HDF5 checks no data, so bytes changed in place in a
# .weights.h5 would load as other weights.
STATE = ".state.npz"
WEIGHTS_CRC = "weights_crc32"


def is_keras_checkpoint(path):
    return os.path.exists(path + WEIGHTS)


def weights_match_their_checksum(path):
    """Whether checkpoint `path`'s .weights.h5 has the CRC-32 its save recorded (True where
    none was recorded, or the record cannot be read: the restore reports that)."""
    try:
        with np.load(path + STATE) as state:
            if WEIGHTS_CRC not in state.files:
                return True
            recorded = int(state[WEIGHTS_CRC])
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error):
        return True
    try:
        return file_crc32(path + WEIGHTS) == recorded
    except FileNotFoundError:
        raise CheckpointGone(path) from None


def check_weights(path):
    """Raises DamagedCheckpoint where checkpoint `path`'s .weights.h5 is not the file saved."""
    if not weights_match_their_checksum(path):
        raise DamagedCheckpoint(
            path, f"{os.path.basename(path)}{WEIGHTS} differs from the CRC-32 saved with it",
            lambda other: is_keras_checkpoint(other) and weights_match_their_checksum(other))


def check_resumable(path, backend):
    """Fails unless the trainer of `backend` can resume from checkpoint `path`: each trainer
    reads only its own optimizer state."""
    keras_checkpoint = is_keras_checkpoint(path)
    if not keras_checkpoint and not os.path.exists(path + ".index"):
        raise CheckpointGone(path)  # removed since it was chosen: not another trainer's
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
            check_weights(path)
            try:
                model.load_weights(path + WEIGHTS)
            except FileNotFoundError:
                raise CheckpointGone(path) from None
            return
        if not os.path.exists(path + ".index"):  # neither kind: rotated away as it was read
            raise CheckpointGone(path)
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
