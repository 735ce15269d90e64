"""Which Keras backend this process runs, found as Keras finds it (KERAS_BACKEND, else the
"backend" of $KERAS_HOME/keras.json or ~/.keras/keras.json, else tensorflow) without importing
Keras, which on TensorFlow imports TensorFlow (seconds): the commands decide before that whether
they need TensorFlow at all."""

import json
import os
import sys


def keras_backend():
    if "keras" in sys.modules:
        import keras

        return keras.config.backend()
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    try:
        with open(os.path.join(home, "keras.json"), encoding="utf-8") as f:
            return json.load(f).get("backend", "tensorflow")
    except (OSError, ValueError, AttributeError):
        return "tensorflow"


# The cluster of a multi-host JAX run, by the names keras.distribution.initialize reads (the
# trainer's flags of the same names set them; t2t_lite.backends.jax.hosts starts it).
JAX_CLUSTER_ENVIRONMENT = {"coordinator_address": "KERAS_DISTRIBUTION_JOB_ADDRESSES",
                           "num_processes": "KERAS_DISTRIBUTION_NUM_PROCESSES",
                           "process_id": "KERAS_DISTRIBUTION_PROCESS_ID"}


def jax_cluster_requested():
    """Whether the environment names a JAX cluster, as TF_CONFIG names TensorFlow's."""
    return any(os.environ.get(name) for name in JAX_CLUSTER_ENVIRONMENT.values())
