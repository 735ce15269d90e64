"""tf.distribute for the trainer: the strategy (one device, several GPUs, several machines), which
worker this is, and where each worker writes. Only the chief writes into the model_dir."""

import contextlib
import os
import shutil
import tempfile

import tensorflow as tf

from t2t_lite.utils.errors import UserError


def create_strategy(name="auto"):
    """default / mirrored / multi_worker, or auto: multi_worker when TF_CONFIG is set, mirrored
    when several GPUs are visible, else the default strategy."""
    if name == "auto":
        if os.environ.get("TF_CONFIG"):
            name = "multi_worker"
        elif len(tf.config.list_logical_devices("GPU")) > 1:
            name = "mirrored"
        else:
            name = "default"
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "default":
        return tf.distribute.get_strategy()
    raise UserError(f"unknown --strategy '{name}': use auto, default, mirrored or multi_worker")


def worker_index(strategy):
    """(index of this worker, number of workers): (0, 1) unless multi-worker."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return 0, 1
    cluster = resolver.cluster_spec().as_dict()
    chiefs = len(cluster.get("chief", ()))
    offset = chiefs if resolver.task_type == "worker" else 0
    return offset + resolver.task_id, chiefs + len(cluster.get("worker", ()))


def data_key(strategy):
    """The checkpoint key of the data positions of `strategy`'s replicas: kept apart by their
    number, since another number of replicas divides the data otherwise."""
    return f"data_of_{strategy.num_replicas_in_sync}_replicas"


@contextlib.contextmanager
def write_dir(model_dir, strategy):
    """model_dir on the chief; a temporary directory, removed at the end, on the other workers
    of a multi-worker run, which must save alongside the chief but not over its files."""
    if strategy.extended.should_checkpoint:
        yield model_dir
        return
    temporary = tempfile.mkdtemp(prefix=f"t2t_lite-worker-{worker_index(strategy)[0]}-")
    try:
        yield temporary
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
