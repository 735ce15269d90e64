"""The TensorFlow trainer's checkpoints: restoring them (old layouts and damaged files
included) and saving them. Which ones a model_dir holds is t2t_lite.training.checkpoint_list;
copying one to a new model_dir (best/, an average), t2t_lite.training.model_dir_copy; the JAX
trainer's, t2t_lite.backends.jax.checkpoints.
"""

import glob
import logging
import math
import os
import shutil

import keras
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from t2t_lite.model_dir import KERAS_WEIGHTS
from t2t_lite.training.checkpoint_list import CheckpointGone, DamagedCheckpoint
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import save_failure

logger = logging.getLogger("t2t_lite")


# The LayerNorms of each encoder and decoder layer as checkpoints written before they were named
# attributes (up to commit 8694261) name them: `norms/0`, `norms/1`, ... in this order.
LEGACY_NORMS = {"encoder_layers": ("self_attention_norm", "feed_forward_norm"),
                "decoder_layers": ("self_attention_norm", "cross_attention_norm",
                                   "feed_forward_norm")}


# What TensorFlow raises reading a checkpoint whose files were cut short or corrupted; and
# is_damage's OpError of unknown code, which the checkpoint reader raises for an index that is
# no table ("not an sstable (bad magic number)": cut, emptied or overwritten).
DAMAGE_ERRORS = (IndexError, tf.errors.DataLossError, tf.errors.OutOfRangeError)


def is_damage(error):
    return isinstance(error, DAMAGE_ERRORS) or (
        type(error) is tf.errors.OpError and error.error_code == tf.errors.UNKNOWN)


def is_intact(path):
    """Whether every tensor of the checkpoint at `path` reads back (but data positions, which
    only tf.data can read)."""
    try:
        reader = tf.train.load_checkpoint(path)
        for name, dtype in reader.get_variable_to_dtype_map().items():
            if dtype != tf.variant:
                reader.get_tensor(name)
    except tf.errors.NotFoundError:  # its index is missing
        return False
    except (IndexError, tf.errors.OpError) as error:
        if is_damage(error):
            return False
        raise
    return True


def restore_existing(checkpoint, path):
    """Restores every object of `checkpoint` from `path`, failing if one is missing there; what
    else the file holds (a trainer's data positions and dropout seeds) is not needed here. A
    damaged checkpoint is a DamagedCheckpoint naming the newest intact one; one of the JAX
    trainer (its optimizer state is in a .state.npz) a UserError saying so."""
    if os.path.exists(path + KERAS_WEIGHTS) and not os.path.exists(path + ".index"):
        raise UserError(f"{path} is a checkpoint of the JAX trainer ({path}{KERAS_WEIGHTS} and "
                        ".state.npz), whose optimizer state only it reads: run this with "
                        "KERAS_BACKEND=jax")
    try:
        reader = tf.train.load_checkpoint(path)
        checkpoint = _with_optimizer_as_saved(checkpoint, reader)
        if _names_norms_by_index(reader):
            checkpoint = _with_legacy_norm_names(checkpoint)
        checkpoint.restore(path).expect_partial().assert_existing_objects_matched()
    except (AssertionError, ValueError):  # another model's weights: the caller says so
        _quiet_unrestored_values()
        raise
    except (IndexError, tf.errors.OpError) as error:
        if not (os.path.exists(path + ".index") and glob.glob(glob.escape(path) + ".data-*")):
            raise CheckpointGone(path) from None
        if not is_damage(error):
            raise
        raise DamagedCheckpoint(path, error, is_intact) from None


class _UnrestoredValues(logging.Filter):
    """TensorFlow's warnings, when a restore that failed is garbage collected, about each value
    it did not restore: 70-130 lines under the one-line error that names the mismatch."""

    def filter(self, record):
        return not record.getMessage().startswith((
            "Detecting that an object or model or tf.train.Checkpoint is being deleted with "
            "unrestored values", "Value in checkpoint could not be found in the restored object"))


def _quiet_unrestored_values():
    tensorflow_logger = logging.getLogger("tensorflow")
    if not any(isinstance(f, _UnrestoredValues) for f in tensorflow_logger.filters):
        tensorflow_logger.addFilter(_UnrestoredValues())


def restore_model_weights(model, path):
    """Loads the weights of `model` (not an optimizer) from the TensorFlow trainer's
    checkpoint `path`, as restore_existing does."""
    restore_existing(tf.train.Checkpoint(model=model), path)


def save(manager, step, size):
    """manager.save() at `step`; an OS refusal is a UserError naming its cause and leaves no
    partial `ckpt-N_temp` behind. Only a lack of space (ENOSPC, a quota, or less free space
    than the checkpoint needs: as much as the last one, or else about `size` bytes) is reported
    as one, since a read-only or misnamed directory is not fixed by freeing space."""
    try:
        return _save_replacing_links(manager, step)
    except (tf.errors.OpError, OSError) as error:
        remove_partial_saves(manager.directory)
        if manager.latest_checkpoint:
            size = sum(os.path.getsize(path)
                       for path in glob.glob(glob.escape(manager.latest_checkpoint) + ".*"))
        raise UserError(save_failure(error, step, manager.directory, size)) from None


def _save_replacing_links(manager, step):
    """manager.save() at `step`, once the symbolic links (only the links) among the files of
    that checkpoint are removed: TensorFlow writes a checkpoint's .index through a link at its
    path, so a link in a model_dir someone else made could make a save overwrite a file
    outside it."""
    prefix = os.path.join(manager.directory, f"ckpt-{step}")  # the manager's default name
    for path in glob.glob(glob.escape(prefix) + ".*"):
        if os.path.islink(path):
            logger.warning("replacing the link %s by the checkpoint saved there", path)
            os.remove(path)
    return manager.save(checkpoint_number=step)


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


def checkpoint_writer(checkpoint):
    """write_checkpoint(directory, step) -> path, which saves `checkpoint` (a
    tf.train.Checkpoint) in `directory` as its only checkpoint (for model_dir_copy: best/, an
    average); a save the OS refuses (a full disk) is a UserError naming its cause, as save's."""
    def write(directory, step):
        try:
            return _save_replacing_links(
                tf.train.CheckpointManager(checkpoint, directory, max_to_keep=1), step)
        except (tf.errors.OpError, OSError) as error:
            raise UserError(save_failure(error, step, os.path.dirname(directory),
                                         variables_bytes(checkpoint))) from None

    return write


def variables_bytes(checkpoint):
    """The size of the variables of `checkpoint`'s model and optimizer (a trainer's checkpoint
    also holds the data iterators, with their shuffle buffers)."""
    variables = [v for name in ("model", "optimizer")
                 for v in getattr(getattr(checkpoint, name, None), "variables", [])]
    return sum(math.prod(v.shape) * tf.as_dtype(v.dtype).size for v in variables)
