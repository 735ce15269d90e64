"""The JAX trainer's checkpoints: what the TensorFlow trainer's hold, in files either backend
reads without the other. Checkpoint P (model_dir/ckpt-STEP) is two files:

- P.weights.h5: the model's weights, Keras's own format (`Model.save_weights`), which
  `Model.load_weights` reads on every backend: the TensorFlow decoder, exporter and CTranslate2
  converter load it as they load a TensorFlow checkpoint (t2t_lite.training.checkpoint_list
  finds both kinds);
- P.state.npz: what resuming needs besides: the optimizer's variables, the model's other state
  (its dropout seeds), and the position in the data; and the CRC-32 of P.weights.h5, checked
  before the weights are loaded (numpy's zip checks its own arrays' CRCs).

Both are written under temporary names and renamed, the weights last, and the model_dir's list
of checkpoints (the `checkpoint` file) is rewritten after them, so that an interrupted save
leaves the previous checkpoint the latest. The oldest beyond `keep` are removed, as
tf.train.CheckpointManager removes them.
"""

import contextlib
import glob
import json
import logging
import os
import zipfile
import zlib

import h5py
import numpy as np

from t2t_lite.model_dir import KERAS_WEIGHTS
from t2t_lite.training.checkpoint_list import (
    CheckpointGone,
    DamagedCheckpoint,
    checkpoint_paths,
    write_list,
)
from t2t_lite.training.model_weights import (
    STATE,
    WEIGHTS_CRC,
    check_weights,
    weights_match_their_checksum,
)
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import file_crc32, save_failure

logger = logging.getLogger("t2t_lite")
WEIGHTS = KERAS_WEIGHTS
_TEMPORARY = ".saving"
# What reading a file cut short or corrupted raises: h5py's OSError, numpy's zip errors.
DAMAGE_ERRORS = (OSError, EOFError, zipfile.BadZipFile, zlib.error)


def save(model, optimizer, directory, step, position, keep):
    """Writes checkpoint directory/ckpt-`step` of `model` and `optimizer` (their variables hold
    the values to save) and the data `position` (a dict of numbers); returns its path."""
    path = os.path.join(directory, f"ckpt-{step}")
    temporary = f"{path}{_TEMPORARY}{os.getpid()}"
    state = {f"optimizer_{i}": np.asarray(v.value) for i, v in enumerate(optimizer.variables)}
    state.update({f"model_{i}": np.asarray(v.value)
                  for i, v in enumerate(model.non_trainable_variables)})
    state["position"] = np.asarray(json.dumps(position))
    try:
        model.save_weights(temporary + WEIGHTS)
        state[WEIGHTS_CRC] = np.asarray(file_crc32(temporary + WEIGHTS), "int64")
        with open(temporary + STATE, "wb") as f:
            np.savez(f, **state)
        os.replace(temporary + STATE, path + STATE)
        os.replace(temporary + WEIGHTS, path + WEIGHTS)
    except OSError as error:  # a full disk, a file-size limit, permissions: nothing partial
        for suffix in (WEIGHTS, STATE):
            with contextlib.suppress(OSError):
                os.remove(temporary + suffix)
        size = sum(value.nbytes for value in state.values()) + sum(
            int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in model.weights)
        raise UserError(save_failure(error, step, directory, size)) from None
    paths = [p for p in checkpoint_paths(directory) if p != path] + [path]
    write_list(directory, paths[-keep:])
    for old in paths[:-keep]:
        for suffix in (WEIGHTS, STATE):
            if os.path.exists(old + suffix):
                os.remove(old + suffix)
    logger.info("saved %s", path)
    return path


def remove_partial_saves(directory):
    """Removes what a save interrupted by SIGKILL or a crash left."""
    for path in glob.glob(os.path.join(glob.escape(directory), f"*{_TEMPORARY}*")):
        os.remove(path)


def restore(model, optimizer, path):
    """Loads checkpoint `path` into `model` and `optimizer` (built); its data position is
    read_position's. One whose files do not read back, or whose weights differ from their
    CRC-32, is a DamagedCheckpoint naming the newest intact one; so is one without its
    .state.npz (its weights alone would restart the schedule and the optimizer at step 0); one
    removed while it is read, CheckpointGone."""
    try:
        if not os.path.exists(path + STATE):
            raise FileNotFoundError(path + STATE)
        check_weights(path)
        model.load_weights(path + WEIGHTS)
        with np.load(path + STATE) as state:
            for name, variables in (("optimizer", optimizer.variables),
                                    ("model", model.non_trainable_variables)):
                saved = sorted((k for k in state.files if k.startswith(name + "_")),
                               key=lambda k: int(k.rsplit("_", 1)[1]))
                if len(saved) != len(variables):
                    if name == "model" and all(_is_dropout_seed(v) for v in variables):
                        continue  # a dropout turned on or off on resume: fresh seeds
                    raise UserError(f"{path}{STATE} holds {len(saved)} {name} variables where "
                                    f"this model has {len(variables)}: it is another model's")
                for variable, key in zip(variables, saved):
                    variable.assign(state[key])
    except FileNotFoundError as error:
        if os.path.exists(path + WEIGHTS) and not os.path.exists(path + STATE):
            raise DamagedCheckpoint(path, f"its {STATE} is missing", is_intact) from None
        raise CheckpointGone(path) from error
    except DAMAGE_ERRORS as error:
        raise DamagedCheckpoint(path, error, is_intact) from None


def _is_dropout_seed(variable):
    """The model's only state besides its weights is its dropout layers' seeds; a layer whose
    rate is 0 has none (keras.layers.Dropout), so their number changes with the training-only
    hparams (config.TRAINING_ONLY) that a resumed run may change."""
    return variable.path.endswith("seed_generator_state")


def read_position(path):
    """The data position saved with checkpoint `path` ({} where it has none)."""
    with np.load(path + STATE) as state:
        return json.loads(str(state["position"]))


def is_intact(path):
    """Whether both files of checkpoint `path` read back whole."""
    try:
        with h5py.File(path + WEIGHTS, "r") as weights:
            weights.visititems(lambda name, item: item[()] if isinstance(item, h5py.Dataset)
                               else None)
        with np.load(path + STATE) as state:
            for key in state.files:
                state[key]  # noqa: B018 (reads and checks the array)
        return weights_match_their_checksum(path)
    except (FileNotFoundError, CheckpointGone, *DAMAGE_ERRORS):
        return False
