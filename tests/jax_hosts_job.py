"""One process of tests/test_jax_hosts.py's multi-host JAX run (jax.distributed over gloo
between local processes, each with DEVICES virtual CPU devices):

    KERAS_BACKEND=jax XLA_FLAGS=--xla_force_host_platform_device_count=DEVICES \\
        python tests/jax_hosts_job.py PROCESS PROCESSES PORT OUT_DIR

Every process builds the same global training batches (rows for every device of the run) and
feeds its own devices' rows, as the trainer feeds its share of the data; three updates of
transformer_tiny at tiny_model_dir's sizes (dropout on, seeded), a checkpoint after the second
written by process 0 only, which every process then restores into a new trainer to make the
third update again. Each process writes OUT_DIR/process-PROCESS.npz: the losses, the weights
after the third update, after the restored third update, and its share's row count.
"""

import os
import sys

sys.modules["tensorflow"] = None  # as tests/jax_jobs.py: this side must not need it (nor load it)

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

from t2t_lite import registry  # noqa: E402
from t2t_lite.backends.jax import hosts  # noqa: E402
from t2t_lite.backends.jax.trainer import JaxTrainer, data_devices  # noqa: E402
from t2t_lite.data.numpy_pipeline import TrainingBatches  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from tiny_model_dir import OVERRIDES  # noqa: E402

VOCAB_SIZE = 24


def examples():
    """Reversal of 1-10 random symbols (ids 2 to VOCAB_SIZE - 1, then EOS = 1)."""
    rng = np.random.default_rng(0)
    pairs = []
    for _ in range(300):
        symbols = rng.integers(2, VOCAB_SIZE, rng.integers(1, 11)).astype("int32")
        pairs.append({"inputs": np.append(symbols, 1).astype("int32"),
                      "targets": np.append(symbols[::-1], 1).astype("int32")})
    return pairs


def main(process, processes, port, out_dir):
    os.environ.update({"KERAS_DISTRIBUTION_JOB_ADDRESSES": f"127.0.0.1:{port}",
                       "KERAS_DISTRIBUTION_NUM_PROCESSES": str(processes),
                       "KERAS_DISTRIBUTION_PROCESS_ID": str(process)})
    hosts.initialize()
    keras.distribution.set_distribution(keras.distribution.DataParallel())
    hparams = registry.hparams("transformer_tiny").override(
        f"{OVERRIDES},dropout=0.1,batch_size=64")
    everything = TrainingBatches(examples(), hparams.batch_size, hparams.max_length, seed=0,
                                 devices=jax.device_count())
    local = data_devices(local=True)
    first = jax.process_index() * local  # this process's devices' rows come after the others'

    def share(batch):
        features, labels = batch
        rows = len(labels) // jax.device_count()
        part = slice(first * rows, (first + local) * rows)
        return {k: v[part] for k, v in features.items()}, labels[part]

    batches = [share(next(everything)) for _ in range(3)]
    keras.utils.set_random_seed(7)
    trainer = JaxTrainer(hparams, VOCAB_SIZE)
    losses = [trainer.train_step([batch])["loss"] for batch in batches[:2]]
    # Process 0 writes the checkpoint (the others' would go to their own temporary directories).
    checkpoints = os.path.join(out_dir, "checkpoints")
    os.makedirs(checkpoints, exist_ok=True)
    path = trainer.save(checkpoints, {}, keep=2) if process == 0 else None
    hosts.barrier("checkpoint written")
    losses.append(trainer.train_step([batches[2]])["loss"])

    keras.utils.set_random_seed(11)  # another initialization, which restore() replaces
    restored = JaxTrainer(hparams, VOCAB_SIZE)
    restored.restore(path or os.path.join(checkpoints, "ckpt-2"))
    restored_loss = restored.train_step([batches[2]])["loss"]
    results = {"losses": np.array(losses), "restored_loss": np.array(restored_loss),
               "rows": np.array(len(batches[0][1])), "steps": np.array(restored.step)}
    for name, model in (("weight", trainer.model), ("restored", restored.model)):
        for i, variable in enumerate(model.trainable_variables):
            results[f"{name}_{i}"] = np.asarray(variable.value)
    np.savez(os.path.join(out_dir, f"process-{process}.npz"), **results)
    hosts.barrier("results written")


if __name__ == "__main__":
    process, processes, port = map(int, sys.argv[1:4])
    main(process, processes, port, sys.argv[4])
