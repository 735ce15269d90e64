"""Checkpoints of a model_dir: finding them, restoring them (old layouts and damaged files
included), saving them, and copying one to a new model_dir (best/, an average).

A copy is written as a complete model_dir (checkpoint, the experiment's records, info.json), so
that every command takes it as `--model_dir`; it is built under a temporary name and renamed
when complete.
"""

import glob
import json
import logging
import os
import shutil
import tempfile

import keras
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from t2t_lite.model_dir import CHECKPOINT_LIST, ModelDir
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import (
    error_cause,
    make_directory,
    temporary_directory,
    write_failure,
    write_text_atomically,
)

logger = logging.getLogger("t2t_lite")


def checkpoint_paths(model_dir):
    """The checkpoints CheckpointManager kept in model_dir, oldest first."""
    state = _checkpoint_state(model_dir)
    return list(state.all_model_checkpoint_paths) if state else []


def _checkpoint_state(model_dir):
    """tf.train.get_checkpoint_state(model_dir): None for no list, or one it cannot read."""
    try:
        return tf.train.get_checkpoint_state(model_dir)
    except ValueError:  # a list naming no checkpoint (e.g. an empty file)
        return None


def checkpoint_step(path):
    """The step of a checkpoint the trainer saved (it numbers them by step): ckpt-1500 -> 1500."""
    return int(path.rsplit("-", 1)[1])


def latest_step(model_dir):
    """The step of the latest checkpoint in model_dir (0 without one)."""
    latest = _newest_there(model_dir)[0]
    return checkpoint_step(latest) if latest else 0


def latest_checkpoint(model_dir, repair=False):
    """The newest checkpoint in model_dir whose files are there, or None. Unlike
    tf.train.latest_checkpoint, which gives None (and the trainer starts over at step 0), a
    checkpoint of the list whose index is missing (deleted, or not copied), or a list that is
    missing or unreadable, is a warning naming it, and the newest checkpoint there is used.
    `repair` (for the trainer, which keeps the list) rewrites the list to name those there."""
    latest, missing, there = _newest_there(model_dir)
    if missing:
        named = (f"checkpoint {missing[0]} is" if len(missing) == 1 else
                 f"checkpoints {', '.join(missing)} are")
        logger.warning("%s missing (no .index file: deleted, or a bad copy?): %s", named,
                       f"using {latest}, the newest checkpoint there" if latest else
                       f"{model_dir} holds no other")
    elif latest and missing is None:
        logger.warning("%s is missing or unreadable: using %s, the newest checkpoint there",
                       os.path.join(model_dir, CHECKPOINT_LIST), latest)
    if repair and latest and missing != []:
        _write_list(model_dir, there)
    return latest


def _newest_there(model_dir):
    """(the newest checkpoint whose index is there or None, the paths the list names that are
    not there (None when there is no readable list), the checkpoints there oldest first)."""
    state = _checkpoint_state(model_dir)
    if state:
        listed = list(state.all_model_checkpoint_paths)
        if state.model_checkpoint_path not in listed:
            listed.append(state.model_checkpoint_path)
        there = [path for path in listed if os.path.exists(f"{path}.index")]
        if there:
            return there[-1], [path for path in listed if path not in there], there
    indexed = {}
    for index in glob.glob(os.path.join(glob.escape(model_dir), "*-*.index")):
        path = index[:-len(".index")]
        if path.rsplit("-", 1)[1].isdigit():
            indexed[path] = checkpoint_step(path)
    there = sorted(indexed, key=indexed.get)
    missing = [p for p in listed if p not in there] if state else None
    return (there[-1] if there else None), missing, there


def resolve_checkpoint(model_dir, checkpoint_path=None):
    """The checkpoint to load: checkpoint_path (a checkpoint prefix or a directory holding
    checkpoints), or else the latest in model_dir."""
    if checkpoint_path:
        if os.path.isdir(checkpoint_path):
            path = latest_checkpoint(checkpoint_path)
            if not path:
                raise UserError(f"--checkpoint_path {checkpoint_path} holds no checkpoint")
            return path
        if not tf.io.gfile.exists(checkpoint_path + ".index"):
            raise UserError(f"--checkpoint_path {checkpoint_path} is not a checkpoint (no "
                            f"{os.path.basename(checkpoint_path)}.index); `ls` the model_dir "
                            "for ckpt-N names")
        return checkpoint_path
    path = latest_checkpoint(model_dir)
    if not path:
        raise UserError(f"{model_dir} holds no checkpoint: train it with t2t-lite-trainer first")
    return path


# The LayerNorms of each encoder and decoder layer as checkpoints written before they were named
# attributes (up to commit 8694261) name them: `norms/0`, `norms/1`, ... in this order.
LEGACY_NORMS = {"encoder_layers": ("self_attention_norm", "feed_forward_norm"),
                "decoder_layers": ("self_attention_norm", "cross_attention_norm",
                                   "feed_forward_norm")}


# What TensorFlow raises reading a checkpoint whose files were cut short or corrupted.
DAMAGE_ERRORS = (IndexError, tf.errors.DataLossError, tf.errors.OutOfRangeError)


class DamagedCheckpoint(UserError):
    """A checkpoint whose files cannot be read back (a truncated copy or sync)."""

    def __init__(self, path, error):
        intact = [p for p in reversed(checkpoint_paths(os.path.dirname(path)))
                  if p != path and is_intact(p)]
        fix = (f"pass --checkpoint_path={intact[0]}, the newest intact one" if intact else
               "copy it again from where it was made")
        self.damage = f"checkpoint {path} is damaged ({error}; a bad copy or sync?)"
        super().__init__(f"{self.damage}: {fix}")


class CheckpointGone(UserError):
    """A checkpoint whose files were removed while it was read: the trainer's rotation
    (--keep_checkpoints) deletes the oldest as it saves a new one."""

    def __init__(self, path):
        self.path = path
        super().__init__(f"checkpoint {path} was removed while it was read (a trainer keeping "
                         "only its newest checkpoints?): run the same command again")


def is_intact(path):
    """Whether every tensor of the checkpoint at `path` reads back (but data positions, which
    only tf.data can read)."""
    try:
        reader = tf.train.load_checkpoint(path)
        for name, dtype in reader.get_variable_to_dtype_map().items():
            if dtype != tf.variant:
                reader.get_tensor(name)
    except (*DAMAGE_ERRORS, tf.errors.NotFoundError):  # NotFoundError: its index is missing
        return False
    return True


def restore_existing(checkpoint, path):
    """Restores every object of `checkpoint` from `path`, failing if one is missing there; what
    else the file holds (a trainer's data positions and dropout seeds) is not needed here. A
    damaged checkpoint is a DamagedCheckpoint naming the newest intact one."""
    try:
        reader = tf.train.load_checkpoint(path)
        checkpoint = _with_optimizer_as_saved(checkpoint, reader)
        if _names_norms_by_index(reader):
            checkpoint = _with_legacy_norm_names(checkpoint)
        checkpoint.restore(path).expect_partial().assert_existing_objects_matched()
    except (*DAMAGE_ERRORS, tf.errors.NotFoundError) as error:
        if not (os.path.exists(path + ".index") and glob.glob(glob.escape(path) + ".data-*")):
            raise CheckpointGone(path) from None
        if isinstance(error, tf.errors.NotFoundError):
            raise
        raise DamagedCheckpoint(path, error) from None


def forget_checkpoint(model_dir, path):
    """Removes `path` from model_dir's list of checkpoints, so that the latest is the one
    before it; its files stay until a new checkpoint of that step replaces them."""
    _write_list(model_dir, [p for p in checkpoint_paths(model_dir) if p != path])


def _write_list(model_dir, paths):
    """Makes model_dir's list of checkpoints (the `checkpoint` text proto CheckpointManager
    reads) name `paths`, the last the latest, or removes it for none. Written here, not by
    tf.compat.v1.train.update_checkpoint_state, which prints a deprecation notice."""
    path = os.path.join(model_dir, CHECKPOINT_LIST)
    if not paths:
        os.remove(path)
        return
    names = [json.dumps(os.path.relpath(p, model_dir), ensure_ascii=False) for p in paths]
    write_text_atomically(path, f"model_checkpoint_path: {names[-1]}\n" + "".join(
        f"all_model_checkpoint_paths: {name}\n" for name in names))


def save(manager, step, size):
    """manager.save() at `step`; an OS refusal is a UserError naming its cause and leaves no
    partial `ckpt-N_temp` behind. Only a lack of space (ENOSPC, a quota, or less free space
    than the checkpoint needs: as much as the last one, or else about `size` bytes) is reported
    as one, since a read-only or misnamed directory is not fixed by freeing space."""
    try:
        return manager.save(checkpoint_number=step)
    except (tf.errors.OpError, OSError) as error:
        remove_partial_saves(manager.directory)
        if manager.latest_checkpoint:
            size = sum(os.path.getsize(path)
                       for path in glob.glob(glob.escape(manager.latest_checkpoint) + ".*"))
        raise UserError(save_failure(error, step, manager.directory, size)) from None


def save_failure(error, step, directory, size):
    """The one-line message of a checkpoint save that failed with `error` (an OSError or a
    TensorFlow OpError) in `directory`, with the fix for its cause."""
    what = f"save the checkpoint of step {step}"
    return (write_failure(error, what, directory, size)
            or f"cannot {what} in {directory} ({error_cause(error)}): fix that and run the same "
            "command again")


def remove_partial_saves(directory):
    """Deletes the `ckpt-N_temp` directories a save that failed midway left in directory."""
    for path in glob.glob(os.path.join(glob.escape(directory), "*_temp")):
        if os.path.isdir(path):
            logger.info("removing %s, left by a checkpoint save that failed", path)
            shutil.rmtree(path, ignore_errors=True)


def _with_optimizer_as_saved(checkpoint, reader):
    """A view of `checkpoint` with its optimizer nested as in the checkpoint `reader` reads, so
    that a run may change precision on resume: mixed_float16's LossScaleOptimizer wraps the
    Adam that the other precisions save alone. Adam's state carries over; the loss scale
    starts afresh."""
    optimizer = getattr(checkpoint, "optimizer", None)
    if optimizer is None:
        return checkpoint
    saved_wrapped = any(name.startswith("optimizer/inner_optimizer/")
                        for name in reader.get_variable_to_shape_map())
    wrapped = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    if saved_wrapped == wrapped:
        return checkpoint
    as_saved = (optimizer.inner_optimizer if wrapped
                else tf.train.Checkpoint(inner_optimizer=optimizer))
    return tf.train.Checkpoint(model=checkpoint.model, optimizer=as_saved)


def _names_norms_by_index(reader):
    graph = trackable_object_graph_pb2.TrackableObjectGraph.FromString(
        reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    return any(child.local_name == "norms" for node in graph.nodes for child in node.children)


def _with_legacy_norm_names(checkpoint):
    """The objects of `checkpoint` as old checkpoints name them: restoring this view restores
    them from a checkpoint written before the layers' norms were named attributes."""
    def view(trackable, drop=(), **replace):
        # _trackable_children: the Trackable API for an object's named dependencies.
        children = {name: child for name, child in trackable._trackable_children().items()
                    if name not in drop and name != "save_counter"}  # not a restored object
        return tf.train.Checkpoint(**{**children, **replace})

    def layer_view(layer, names):
        return view(layer, drop=names, norms=tuple(getattr(layer, name) for name in names))

    model = checkpoint.model
    return view(checkpoint, model=view(model, **{
        attribute: tuple(layer_view(layer, names) for layer in getattr(model, attribute))
        for attribute, names in LEGACY_NORMS.items()}))


def last_checkpoints(model_dir, n):
    """The last n checkpoints CheckpointManager kept in model_dir, oldest first."""
    paths = checkpoint_paths(model_dir)
    if not paths:
        raise UserError(f"{model_dir} holds no checkpoint: train it with t2t-lite-trainer first")
    if n > len(paths):
        raise UserError(f"--n={n} but {model_dir} keeps only {len(paths)} checkpoints (see the "
                        "trainer's --keep_checkpoints)")
    return paths[-n:]


def check_new_dir(output_dir):
    """Fails early (before any work) if output_dir cannot become a new model_dir."""
    if os.path.isdir(output_dir) and os.listdir(output_dir):
        raise UserError(f"{output_dir} already exists and is not empty: choose a new output "
                        "directory or remove it")
    make_directory(output_dir, "output_dir")  # empty: save_model_dir replaces it


def save_model_dir(checkpoint, step, model_dir, output_dir, info, replace=False):
    """Saves `checkpoint` at `step` as a new model_dir output_dir with the experiment of
    model_dir and `info` in info.json; returns the checkpoint's path. The directory is
    built under a temporary name and renamed, so output_dir is never half-written; an existing
    non-empty output_dir is an error unless `replace`."""
    output_dir = os.path.abspath(output_dir)
    if not replace:
        check_new_dir(output_dir)
    parent = os.path.dirname(output_dir)
    os.makedirs(parent, exist_ok=True)
    temporary = temporary_directory(parent, f".{os.path.basename(output_dir)}-")
    try:
        for path in ModelDir(model_dir).experiment_files():
            shutil.copy(path, temporary)
        ModelDir(temporary).write_info(info)
        saved = tf.train.CheckpointManager(checkpoint, temporary, max_to_keep=1).save(
            checkpoint_number=step)
        if os.path.isdir(output_dir):
            old = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(output_dir)}-old-")
            os.replace(output_dir, old)
            os.replace(temporary, output_dir)
            shutil.rmtree(old)
        else:
            os.replace(temporary, output_dir)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return os.path.join(output_dir, os.path.basename(saved))
