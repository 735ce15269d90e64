"""The JAX trainer's checkpoints: what the TensorFlow trainer's hold, in files either backend
reads without the other. Checkpoint P (model_dir/ckpt-STEP) is two files:

- P.weights.h5: the model's weights, Keras's own format (`Model.save_weights`), which
  `Model.load_weights` reads on every backend: the TensorFlow decoder, exporter and CTranslate2
  converter load it as they load a TensorFlow checkpoint (t2t_lite.training.checkpoint_list
  finds both kinds);
- P.state.npz: what resuming needs besides: the optimizer's variables, the model's other state
  (its dropout seeds), and the position in the data.

Both are written under temporary names and renamed, the weights last, and the model_dir's list
of checkpoints (the `checkpoint` file) is rewritten after them, so that an interrupted save
leaves the previous checkpoint the latest. The oldest beyond `keep` are removed, as
tf.train.CheckpointManager removes them.
"""

import glob
import json
import logging
import os

import numpy as np

from t2t_lite.training.checkpoint_list import write_list, checkpoint_paths
from t2t_lite.utils.errors import UserError

logger = logging.getLogger("t2t_lite")
WEIGHTS = ".weights.h5"
STATE = ".state.npz"
_TEMPORARY = ".saving"


def save(model, optimizer, directory, step, position, keep):
    """Writes checkpoint directory/ckpt-`step` of `model` and `optimizer` (their variables hold
    the values to save) and the data `position` (a dict of numbers); returns its path."""
    path = os.path.join(directory, f"ckpt-{step}")
    temporary = f"{path}{_TEMPORARY}{os.getpid()}"
    state = {f"optimizer_{i}": np.asarray(v.value) for i, v in enumerate(optimizer.variables)}
    state.update({f"model_{i}": np.asarray(v.value)
                  for i, v in enumerate(model.non_trainable_variables)})
    state["position"] = np.asarray(json.dumps(position))
    with open(temporary + STATE, "wb") as f:
        np.savez(f, **state)
    model.save_weights(temporary + WEIGHTS)
    os.replace(temporary + STATE, path + STATE)
    os.replace(temporary + WEIGHTS, path + WEIGHTS)
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
    """Loads checkpoint `path` into `model` and `optimizer` (built); returns its data
    position, or None where it has none (an average, or best/: weights only)."""
    model.load_weights(path + WEIGHTS)
    if not os.path.exists(path + STATE):
        return None
    with np.load(path + STATE) as state:
        for name, variables in (("optimizer", optimizer.variables),
                                ("model", model.non_trainable_variables)):
            saved = sorted((k for k in state.files if k.startswith(name + "_")),
                           key=lambda k: int(k.rsplit("_", 1)[1]))
            if len(saved) != len(variables):
                raise UserError(f"{path}{STATE} holds {len(saved)} {name} variables where this "
                                f"model has {len(variables)}: it is another model's")
            for variable, key in zip(variables, saved):
                variable.assign(state[key])
        return json.loads(str(state["position"]))
