"""The JAX wing's Backend: keras.distribution's DataParallel over the local devices, the
JaxTrainer's jitted update, batches read without TensorFlow, the JaxTranslator."""

import contextlib
import logging
import os

from t2t_lite.backends.base import Backend
from t2t_lite.data.buckets import nothing_fits, training_length_limit
from t2t_lite.utils.errors import UserError

logger = logging.getLogger("t2t_lite")


def compile_hint(platform, steps_per_bucket, environ=os.environ):
    """What to do about the programs length buckets make an accelerator compile, or None: XLA
    compiles one per batch shape on its first batch, which on a GPU takes longer than a
    thousand updates of one shape (~17 s each for transformer_small_data on one H200,
    benchmarks/results/backends.md), so a short run spends its budget compiling."""
    shapes = sum(1 for steps in steps_per_bucket if steps)
    if platform == "cpu" or shapes < 2:
        return None
    cache = "" if environ.get("JAX_COMPILATION_CACHE_DIR") else (
        ", and JAX_COMPILATION_CACHE_DIR keeps compiled programs for the next run")
    return (f"on {platform}, each of the {shapes} length buckets' batch shapes is compiled on its "
            f"first batch (seconds each): --hparams=packed_length=L (at least the longest "
            f"example) trains on one shape{cache} (docs/guides/jax.md, Shapes)")


class JaxBackend(Backend):
    name = "jax"

    def import_framework(self):
        import jax  # noqa: F401 (its start-up, before any work)

        from t2t_lite.backends.tensorflow.quiet import import_tensorflow_quietly

        # keras-hub (the model's layers) imports TensorFlow where it is installed: quietly.
        import_tensorflow_quietly(if_installed=True)

    def distribution(self, strategy=None):
        """DataParallel over every local device (auto, with more than one; mirrored), or none
        (default, or one device): keras.distribution's, set for the process. multi_worker (or
        auto where KERAS_DISTRIBUTION_* name a cluster): jax.distributed's processes, and
        DataParallel over the devices of them all (see t2t_lite.backends.jax.hosts)."""
        import jax
        import keras

        from t2t_lite.backends.jax import hosts
        from t2t_lite.backends.jax.trainer import current_distribution

        if strategy is None:
            return current_distribution()
        if strategy == "multi_worker" or (strategy == "auto" and hosts.requested()):
            hosts.initialize()
            keras.distribution.set_distribution(keras.distribution.DataParallel())
            return current_distribution()
        if strategy not in ("auto", "default", "mirrored"):
            raise UserError(f"unknown --strategy '{strategy}': use auto, default, mirrored or "
                            "multi_worker")
        devices = jax.local_devices()
        if strategy == "default" or (strategy == "auto" and len(devices) == 1):
            keras.distribution.set_distribution(None)
        else:
            keras.distribution.set_distribution(keras.distribution.DataParallel())  # every one
        return current_distribution()

    def trainer(self, hparams, vocab_size, distribution=None, jit_compile=False):
        """A JaxTrainer (jit_compile: JAX always is); with hparams model_parallel > 1, under
        keras.distribution.ModelParallel over every device (backends/jax/model_parallel.py)."""
        import jax
        import keras

        from t2t_lite.backends.jax import hosts
        from t2t_lite.backends.jax.model_parallel import model_parallel
        from t2t_lite.backends.jax.trainer import JaxTrainer

        if hparams.model_parallel > 1:
            if hosts.several():
                raise UserError("model_parallel is for one process's devices: its checkpoints "
                                "cannot yet be gathered across processes; drop it with several "
                                "processes")
            keras.distribution.set_distribution(
                model_parallel(hparams, vocab_size, jax.devices()))
        return JaxTrainer(hparams, vocab_size)

    def training_data(self, problem, data_dir, hparams, seed, distribution):
        """This process's share of the batches: in a multi-host run each process reads its own
        shards, and the processes agree on the batches of each bucket an epoch deals."""
        from t2t_lite.backends.jax import hosts
        from t2t_lite.backends.jax.trainer import data_devices

        data = problem.numpy_batches("train", data_dir, hparams, training=True, seed=seed or 0,
                                     devices=data_devices(local=True),
                                     share=(distribution.worker, distribution.workers))
        if hosts.several():
            data.steps_per_bucket = hosts.largest(data.steps_per_bucket)
            if not sum(data.steps_per_bucket):
                hparam, limit = training_length_limit(hparams)
                raise UserError(nothing_fits(hparam, limit))
        import jax

        hint = compile_hint(jax.default_backend(), data.steps_per_bucket)
        if hint and distribution.worker == 0:
            logger.info(hint)
        return data

    def translate_on_devices(self, translator, distribution):
        return None  # the JaxTranslator runs under the process's keras.distribution

    def data_errors_named(self, problem, data_dir):
        return contextlib.nullcontext()  # shards are read without TensorFlow, checked as read
