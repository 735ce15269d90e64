"""The interface every backend implements (Backend), and where a training run's work goes
(Distribution), as Keras's own keras/src/backend/ puts each backend behind one set of names.

The Runner composes a training run once against this interface: a backend gives it a trainer
(model, optimizer, the update, checkpoint I/O), the training batches it reads, the translator
that decodes in process and how it spreads over the devices. Nothing here imports a framework.
"""

import contextlib
import dataclasses
import shutil
import tempfile


@dataclasses.dataclass(frozen=True)
class Distribution:
    """Where one training run's work goes, on any backend: this process is worker `worker` of
    `workers`, and a batch is split over `devices` replicas in all. `handle` is the backend's
    own (a tf.distribute strategy on TensorFlow; None on JAX, whose keras.distribution is set
    for the process). Only the chief writes into the model_dir."""

    worker: int = 0
    workers: int = 1
    devices: int = 1
    unit: str = "replica(s)"  # what the log calls a device
    handle: object = dataclasses.field(default=None, compare=False)

    @property
    def is_chief(self):
        return self.worker == 0

    def describe(self):
        return f"{self.devices} {self.unit}"

    @contextlib.contextmanager
    def write_dir(self, model_dir):
        """model_dir on the chief; a temporary directory, removed at the end, on the other
        workers of a multi-worker run, which must save alongside the chief but not over its
        files."""
        if self.is_chief:
            yield model_dir
            return
        temporary = tempfile.mkdtemp(prefix=f"t2t_lite-worker-{self.worker}-")
        try:
            yield temporary
        finally:
            shutil.rmtree(temporary, ignore_errors=True)


class Backend:
    """One Keras backend's ways of training and decoding; see backends.current()."""

    name = None  # Keras's name for it, and the in-process decoding engine (export.engines)

    def import_framework(self):
        """Imports the framework quietly (its C++ notices hidden), before any work: the
        commands do this first, so that start-up is paid once and Ctrl-C is handled."""
        raise NotImplementedError

    def distribution(self, strategy=None):
        """The Distribution of the trainer's --strategy (auto, default, mirrored,
        multi_worker), set up for this process; None: the process's current one, unchanged."""
        raise NotImplementedError

    def trainer(self, hparams, vocab_size, distribution=None, jit_compile=False):
        """A new trainer (not restored) with `model`, `optimizer`, `step`, `restore(path)`,
        `reload()`, `train(data, ...)`, `evaluate_split(...)`, `write_checkpoint(...)`."""
        raise NotImplementedError

    def training_data(self, problem, data_dir, hparams, seed, distribution):
        """What the trainer's train() reads: problem's training batches in data_dir."""
        raise NotImplementedError

    def translate_on_devices(self, translator, distribution):
        """A callable like translator.translate_tokens that spreads the evaluations' decoding
        over the distribution's devices, or None where the translator does it itself."""
        raise NotImplementedError

    def data_errors_named(self, problem, data_dir):
        """A context in which the framework's error for a damaged shard of data_dir becomes a
        UserError naming it and the datagen run that mends it."""
        raise NotImplementedError
