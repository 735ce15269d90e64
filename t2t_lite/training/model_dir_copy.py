"""A checkpoint copied to a new model_dir (best/, an average), of either trainer: a complete
model_dir (the checkpoint, the experiment's records, info.json), so that every command takes it
as `--model_dir`, built under a temporary name and renamed when complete."""

import os
import shutil
import tempfile

from t2t_lite.model_dir import ModelDir
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import (
    locked_temporary_directory,
    make_directory,
    remove_stale_temporaries,
    unlock_for_rename,
)


def check_new_dir(output_dir):
    """Fails early (before any work) if output_dir cannot become a new model_dir."""
    if os.path.isdir(output_dir) and os.listdir(output_dir):
        raise UserError(f"{output_dir} already exists and is not empty: choose a new output "
                        "directory or remove it")
    make_directory(output_dir, "output_dir")  # empty: save_model_dir replaces it


def save_model_dir(write_checkpoint, step, model_dir, output_dir, info, replace=False):
    """Makes output_dir a new model_dir holding the checkpoint write_checkpoint(directory,
    step) writes (and returns the path of), with the experiment of model_dir and `info` in
    info.json; returns the checkpoint's path there. output_dir is never half-written; an
    existing non-empty one is an error unless `replace`."""
    output_dir = os.path.abspath(output_dir)
    if not replace:
        check_new_dir(output_dir)
    parent = os.path.dirname(output_dir)
    os.makedirs(parent, exist_ok=True)
    prefix = f".{os.path.basename(output_dir)}-"
    remove_stale_temporaries(parent, prefix)  # those of a run killed while it wrote
    with locked_temporary_directory(parent, prefix) as temporary:  # removed if this fails
        for path in ModelDir(model_dir).experiment_files():
            shutil.copy(path, temporary)
        ModelDir(temporary).write_info(info)
        saved = write_checkpoint(temporary, step)
        unlock_for_rename(temporary)
        if os.path.isdir(output_dir):
            old = tempfile.mkdtemp(dir=parent, prefix=f"{prefix}old-")
            os.replace(output_dir, old)
            os.replace(temporary, output_dir)
            shutil.rmtree(old)
        else:
            os.replace(temporary, output_dir)
    return os.path.join(output_dir, os.path.basename(saved))
