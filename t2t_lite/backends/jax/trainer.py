"""JaxTrainer: the training loop on Keras's JAX backend, the TensorFlow Trainer's sibling
(t2t_lite.backends.tensorflow.trainer) with the same loss, schedule, accumulation, clipping,
stops and checkpoint contents, and no TensorFlow.

An update: each micro-batch's gradient of its *summed* loss, by jax.value_and_grad over the
model's stateless call (its dropout seeds are state too, threaded through), compiled once per
batch shape; the micro-batches' gradients summed and divided by their tokens (the paper's mean
over all target tokens of the update, as the TensorFlow trainer divides by the all-reduced
count); then the optimizer's stateless update, compiled once. Under
keras.distribution.DataParallel a batch's rows are split over the local devices and XLA
partitions the same programs (the sums become all-reduces). Mixed precision is
mixed_bfloat16, which needs no loss scaling; float16 is TensorFlow's.

The variables' values are arguments of the compiled update (`state`); after each update the Keras
variables are pointed at the new values (no copy), so that a checkpoint, an evaluation or the
translator reads them as on any backend.
"""

import jax
import keras
import numpy as np
from keras import ops

from t2t_lite.models import dropout
from t2t_lite.models.transformer import create_model
from t2t_lite.backends.base import Distribution
from t2t_lite.backends.jax import checkpoints as jax_checkpoints
from t2t_lite.backends.jax import hosts
from t2t_lite.training.loop import run_updates
from t2t_lite.training.loss import batch_statistics, summarize
from t2t_lite.training.optimizer import create_optimizer, decaying, learning_rate_schedule
from t2t_lite.training.scalar_summaries import ScalarWriter
from t2t_lite.training.time_account import TimeAccount
from t2t_lite.utils.errors import UserError


def data_devices(local=False):
    """How many parts a batch's rows are split into: the devices along the batch axis of
    keras.distribution's mesh (all of DataParallel's; ModelParallel's devices / model_parallel),
    if one is set, else 1; `local`: the parts on this process's devices (the rows of its share
    of a training batch, in a multi-host run)."""
    distribution = keras.distribution.distribution()
    if distribution is None:
        return 1
    mesh = distribution.device_mesh.backend_mesh  # a jax.sharding.Mesh
    axis = mesh.axis_names.index(distribution.batch_dim_name)
    if not local:
        return mesh.devices.shape[axis]
    return len({place[axis] for place, device in np.ndenumerate(mesh.devices)
                if device.process_index == jax.process_index()})


def current_distribution():
    """The Distribution of this process: keras.distribution's devices, and this process's
    place among those of a multi-host run (process 0 is the chief)."""
    return Distribution(worker=jax.process_index(), workers=jax.process_count(),
                        devices=data_devices(), unit="device(s) (JAX)")


def _placed(batch):
    """The batch's arrays laid out by the distribution (rows split over its devices): a batch
    every process holds whole (an evaluation's, read by each)."""
    distribution = keras.distribution.distribution()
    if distribution is None:
        return batch
    return jax.tree.map(lambda x: keras.distribution.distribute_tensor(
        x, distribution.get_data_layout(x.shape)), batch)


def _assembled(share):
    """The global training batch whose rows on this process's devices are `share`, this
    process's part (every process reads its own): jax.make_array_from_process_local_data, as
    Keras's own trainer assembles it; on one process, the batch laid out as _placed does."""
    distribution = keras.distribution.distribution()
    if distribution is None:
        return share
    return jax.tree.map(lambda x: jax.make_array_from_process_local_data(
        distribution.get_data_layout(x.shape).backend_layout, x), share)


class JaxTrainer:
    """Owns the model, optimizer and variable values of one run on JAX."""

    def __init__(self, hparams, vocab_size):
        if hparams.precision == "mixed_float16":
            raise UserError("precision=mixed_float16 is TensorFlow's (it needs loss scaling): "
                            "on JAX use precision=mixed_bfloat16")
        self.hparams = hparams
        self.distribution = current_distribution()
        self.model = create_model(hparams, vocab_size)
        self._schedule = learning_rate_schedule(hparams)
        self.optimizer = create_optimizer(hparams, self._schedule)
        self._rate_factor = 1.0  # of the last update (a time budget's cool-down)
        self.optimizer.build(self.model.trainable_variables)
        self._iterations = next(i for i, v in enumerate(self.optimizer.variables)
                                if v.path == self.optimizer.iterations.path)
        self.state = self._read_variables()
        self._gradients = jax.jit(self._micro_batch_gradients)
        self._apply = jax.jit(self._apply_gradients, donate_argnums=(0, 1))
        self._statistics = jax.jit(self._eval_statistics)

    def _read_variables(self):
        return ([v.value for v in self.model.trainable_variables],
                [v.value for v in self.model.non_trainable_variables],
                [v.value for v in self.optimizer.variables])

    def sync(self):
        """Points the Keras variables at the current values."""
        trainable, non_trainable, optimizer = self.state
        for variables, values in ((self.model.trainable_variables, trainable),
                                  (self.model.non_trainable_variables, non_trainable),
                                  (self.optimizer.variables, optimizer)):
            for variable, value in zip(variables, values):
                variable.assign(value)

    def reload(self):
        """Takes the Keras variables' values as the current ones (after a restore)."""
        self.state = self._read_variables()

    @property
    def step(self):
        """Optimizer updates applied so far."""
        return int(self.state[2][self._iterations])

    def learning_rate(self):
        """The rate of the next update at the last update's rate factor (as the TensorFlow
        trainer logs it)."""
        return float(self._schedule(self.step)) * self._rate_factor

    def _micro_batch_gradients(self, trainable, non_trainable, features, labels,
                               dropout_scale=None):
        def loss(trainable, non_trainable):
            # A traced dropout_scale multiplies the dropout rates (models/dropout.py).
            with dropout.scaled(dropout_scale):
                logits, non_trainable = self.model.stateless_call(trainable, non_trainable,
                                                                  features, training=True)
            stats = batch_statistics(logits, features, labels, self.hparams.label_smoothing)
            return stats["loss"], (stats, non_trainable)

        (_, (stats, non_trainable)), gradients = jax.value_and_grad(loss, has_aux=True)(
            trainable, non_trainable)
        return gradients, stats, non_trainable

    def _apply_gradients(self, trainable, optimizer_variables, gradients, tokens, rate_factor,
                         weight_decay=None):
        gradients = [g / ops.maximum(tokens, 1.0) for g in gradients]
        if self.hparams.clip_grad_norm:
            norm = ops.sqrt(sum(ops.sum(ops.square(g)) for g in gradients))
            scale = ops.minimum(1.0, self.hparams.clip_grad_norm / norm)
            gradients = [g * scale for g in gradients]
        # The schedule reads the traced factor, the optimizer a traced weight decay (None: as
        # built), while the update is traced (optimizer.py).
        self._schedule.rate_factor = rate_factor
        try:
            with decaying(self.optimizer, weight_decay):
                trainable, optimizer_variables = self.optimizer.stateless_apply(
                    optimizer_variables, gradients, trainable)
        finally:
            self._schedule.rate_factor = None
        return trainable, optimizer_variables

    def _eval_statistics(self, trainable, non_trainable, features, labels):
        logits, _ = self.model.stateless_call(trainable, non_trainable, features,
                                              training=False)
        return batch_statistics(logits, features, labels, self.hparams.label_smoothing)

    def train_step(self, batches, rate_factor=1.0, dropout_scale=None, weight_decay=None):
        """One optimizer update from the (features, labels) `batches` (accumulate_steps of
        them), at the schedule's rate times `rate_factor`, the dropout rates times
        `dropout_scale` and weight decay `weight_decay` (None: as built); returns their
        statistics, summed."""
        scale = None if dropout_scale is None else jax.numpy.float32(dropout_scale)
        decay = None if weight_decay is None else jax.numpy.float32(weight_decay)
        trainable, non_trainable, optimizer_variables = self.state
        gradients, sums = None, None
        for features, labels in batches:
            features, labels = _assembled((features, labels))
            step_gradients, stats, non_trainable = self._gradients(
                trainable, non_trainable, features, labels, scale)
            if sums is None:
                gradients, sums = step_gradients, stats
            else:
                gradients = [a + b for a, b in zip(gradients, step_gradients)]
                sums = {k: sums[k] + stats[k] for k in sums}
        trainable, optimizer_variables = self._apply(trainable, optimizer_variables, gradients,
                                                     sums["tokens"], jax.numpy.float32(rate_factor),
                                                     decay)
        self._rate_factor = float(rate_factor)
        self.state = (trainable, non_trainable, optimizer_variables)
        self.sync()  # the update consumed (donated) the arrays the variables held
        return {k: float(v) for k, v in sums.items()}

    def evaluate(self, batches, max_batches=None):
        """Loss, perplexity, token accuracy and padding over the (features, labels) `batches`
        (the first max_batches of them), by the model's weights now (the Keras variables': an
        evaluation of other weights, e.g. an average, sets them)."""
        trainable, non_trainable, _ = self._read_variables()
        sums = None
        for i, (features, labels) in enumerate(batches):
            if max_batches and i == max_batches:
                break
            features, labels = _placed((features, labels))
            stats = self._statistics(trainable, non_trainable, features, labels)
            sums = stats if sums is None else {k: sums[k] + stats[k] for k in sums}
        if sums is None:
            raise UserError("the evaluation data set is empty")
        return summarize({k: float(v) for k, v in sums.items()})

    def evaluate_split(self, problem, split, data_dir, max_batches=None):
        """evaluate() over `split` of `problem` in data_dir, read without TensorFlow."""
        return self.evaluate(problem.numpy_batches(split, data_dir, self.hparams,
                                                   training=False, devices=data_devices()),
                             max_batches)

    def write_checkpoint(self, directory, step):
        """Saves the model and optimizer as `directory`'s only checkpoint, of `step` (best/, an
        average: see t2t_lite.training.model_dir_copy); returns its path."""
        return jax_checkpoints.save(self.model, self.optimizer, directory, step, {}, keep=1)

    def restore(self, path):
        """Loads checkpoint `path`'s model and optimizer (not its data position, which train()
        reads): see checkpoints.restore for what a damaged or another model's checkpoint
        raises."""
        jax_checkpoints.restore(self.model, self.optimizer, path)
        self.reload()

    def save(self, directory, position, keep):
        return jax_checkpoints.save(self.model, self.optimizer, directory, self.step, position,
                                    keep)

    def train(self, data, train_steps, *, checkpoint_dir=None, keep_checkpoints=20,
              resume_from=None, save_every=1000, log_every=100, periodic=(), summary_dir=None,
              budget=None, account=None):
        """Runs updates from `data` (a data.numpy_pipeline.TrainingBatches) until
        `train_steps` in total or the first update that starts after the deadline of `budget`
        (a training.budget.TimeBudget, whose cool-down it follows), as the TensorFlow trainer's
        train does: the data continues where checkpoint `resume_from` left it, checkpoints every
        save_every updates and at the end, `periodic` (every, fn) calls (a True result stops
        training, after a checkpoint), TrainingDiverged on a non-finite loss, Stopped after a
        checkpoint on SIGTERM or SIGINT, the logged metrics written to summary_dir, the time spent
        counted in `account` (a training.time_account.TimeAccount; this trainer also counts the
        time it waits for its batches, read outside the compiled update). Returns the step
        reached."""
        if resume_from:
            position = jax_checkpoints.read_position(resume_from)
            if position:
                data.position = position
        if checkpoint_dir:
            jax_checkpoints.remove_partial_saves(checkpoint_dir)
        writer = ScalarWriter(summary_dir) if summary_dir else None

        account = account or TimeAccount()
        if budget and hosts.several():
            budget = hosts.AgreedBudget(budget)

        def update(stop, out_of_time, rate_factor, dropout_scale, weight_decay):
            stop, out_of_time = hosts.agree_on_stops(stop, out_of_time)
            with account.measuring("input"):
                batches = [next(data) for _ in range(self.hparams.accumulate_steps)]
            sums = self.train_step(batches, rate_factor, dropout_scale, weight_decay)
            return sums, self.step, stop, out_of_time

        def save():
            if not checkpoint_dir:
                return None
            path = self.save(checkpoint_dir, data.position, keep_checkpoints)
            # No process goes on (or exits, on a stop) before process 0's checkpoint is whole:
            # a scheduler that ends the job when one process exits cannot cut it short.
            hosts.barrier(f"saved step {self.step}")
            return path

        try:
            return run_updates(update, save, self.learning_rate, step=self.step,
                               train_steps=train_steps, save_every=save_every,
                               log_every=log_every, periodic=periodic,
                               summaries=writer.scalars if writer else None, budget=budget,
                               account=account)
        finally:
            if writer:
                writer.close()
