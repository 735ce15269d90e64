"""tf.distribute for the trainer: the strategy (one device, several GPUs, several machines), which
worker this is, and the Distribution the Runner sees of it."""

import json
import os

import tensorflow as tf

from t2t_lite.backends.base import Distribution
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
        if os.environ.get("TF_CONFIG"):
            check_tf_config(os.environ["TF_CONFIG"])
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "default":
        return tf.distribute.get_strategy()
    raise UserError(f"unknown --strategy '{name}': use auto, default, mirrored or multi_worker")


def check_tf_config(text):
    """Checks the TF_CONFIG `text` that MultiWorkerMirroredStrategy reads (TensorFlow fails on a
    malformed one with a traceback that never names it, or waits for a worker that is not in
    its cluster): a UserError naming TF_CONFIG, what is wrong and the fix."""

    def refuse(problem):
        return UserError(f"TF_CONFIG {problem}: set it to this worker's line of "
                         "`t2t-lite-make-tf-configs --workers=HOST:PORT,...`, or unset it to "
                         "train on this machine alone")

    try:
        config = json.loads(text)
    except ValueError as error:
        raise refuse(f"is not JSON ({error})") from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    if not isinstance(cluster, dict) or not cluster:
        raise refuse('has no "cluster" object of jobs, e.g. {"worker": ["10.0.0.1:2222", ...]}')
    for job, addresses in cluster.items():
        if not isinstance(addresses, list) or not addresses:
            raise refuse(f"job '{job}' is not a list of host:port addresses")
        for address in addresses:
            host, _, port = str(address).rpartition(":")
            if not isinstance(address, str) or not host or not port.isdigit():
                raise refuse(f"job '{job}' lists {json.dumps(address)}, not host:port")
    task = config.get("task")
    if not isinstance(task, dict) or not isinstance(task.get("type"), str) or (
            task["type"] not in cluster):
        raise refuse(f'has no "task" of a job in its cluster ({", ".join(cluster)}), e.g. '
                     '{"type": "worker", "index": 0}')
    job, index = task["type"], task.get("index")
    count = len(cluster[job])
    if isinstance(index, str) and index.isdigit():  # as TensorFlow reads it
        index = int(index)
    if type(index) is not int or not 0 <= index < count:
        raise refuse(f"task index {json.dumps(index)} is not in [0, {count - 1}]: job '{job}' "
                     f"has {count} address{'es' if count > 1 else ''}")


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


def of_strategy(strategy=None):
    """The Distribution of a tf.distribute `strategy` (default: the current one)."""
    strategy = strategy or tf.distribute.get_strategy()
    worker, workers = worker_index(strategy)
    return Distribution(worker, workers, strategy.num_replicas_in_sync, "replica(s)", strategy)
