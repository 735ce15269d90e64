"""Checkpoint averaging: the element-wise mean of the weights of several checkpoints, written as
a model_dir of its own. The paper's reported models average the last 5 (base) or 20 (big)."""

import logging
import os

import numpy as np

from t2t_lite.training.model_dir_copy import check_new_dir, save_model_dir
from t2t_lite.utils.progress import Progress

logger = logging.getLogger("t2t_lite")


def average_checkpoints(trainer, paths, model_dir, output_dir, info=None, replace=False):
    """Writes to output_dir a model_dir whose model weights are the element-wise mean of those
    of the checkpoints `paths` of the ModelDir model_dir, restored into `trainer` (of either
    backend: its restore(path) loads a checkpoint whole, write_checkpoint(directory, step)
    saves one); its step and optimizer state are the last path's, so training could even
    continue from it. `info` goes into its info.json besides the averaged paths; an existing
    output_dir is an error unless `replace`. Returns the new checkpoint's path."""
    if not replace:
        check_new_dir(output_dir)
    model = trainer.model
    variables = [v for v in model.variables if "float" in str(v.dtype)]
    sums = [np.zeros(v.shape, "float64") for v in variables]
    with Progress("averaged", "checkpoints", total=len(paths)) as progress:
        for path in paths:  # the last restored stays: its step and optimizer state are kept
            trainer.restore(path)
            for total, variable in zip(sums, variables):
                total += np.asarray(variable.numpy(), "float64")
            progress.update(1)
    for total, variable in zip(sums, variables):
        variable.assign((total / len(paths)).astype(variable.dtype))
    logger.info("averaged %d checkpoints: %s", len(paths), ", ".join(map(os.path.basename, paths)))
    return save_model_dir(trainer.write_checkpoint, trainer.step, model_dir, output_dir,
                          {"averaged_checkpoints": list(paths), **(info or {})}, replace)
