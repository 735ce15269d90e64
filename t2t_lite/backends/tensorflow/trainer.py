"""Trainer: the distributed training loop on TensorFlow (tf.distribute), with checkpoints that hold
the model, the optimizer, the position in the data and the dropout seeds.

The loop is written on tf.distribute rather than `Model.fit` because the paper's loss is a mean
over *all* target tokens of a step, across replicas and accumulated micro-batches; each replica
therefore sums its token losses, and gradients are divided by the all-reduced token count before
the optimizer's all-reduce. Keras's own `gradient_accumulation_steps` fails under MirroredStrategy
(a merge_call inside a cond); here the micro-batches of one update are unrolled, one after the
other, in one replica function, which works under every strategy.

Each replica reads its own input pipeline through a plain tf.data iterator rather than
tf.distribute's (which cannot be checkpointed), so that a checkpoint holds the position in the
data and a resumed run continues exactly where the interrupted one stopped.
"""

import logging

import keras
import tensorflow as tf

from t2t_lite.models import dropout
from t2t_lite.models.transformer import create_model
from t2t_lite.backends.tensorflow.checkpoints import (
    checkpoint_writer,
    is_damage,
    remove_partial_saves,
    restore_existing,
    save,
    variables_bytes,
)
from t2t_lite.backends.tensorflow.distribution import data_key, of_strategy, worker_index
from t2t_lite.training.loop import run_updates
from t2t_lite.training.loss import batch_statistics, summarize
from t2t_lite.training.optimizer import create_optimizer, decaying, learning_rate_schedule
from t2t_lite.utils.errors import UserError

logger = logging.getLogger("t2t_lite")


class Trainer:
    """Owns the model, optimizer and checkpoint of one run under one tf.distribute strategy.

    With jit_compile, each micro-batch's forward and backward pass is compiled by XLA (the
    all-reduce and the optimizer update stay outside, so it works under every strategy).
    """

    def __init__(self, hparams, vocab_size, strategy=None, jit_compile=False):
        self.hparams = hparams
        self.strategy = strategy or tf.distribute.get_strategy()
        self.distribution = of_strategy(self.strategy)
        # The schedule's factor (a time budget's cool-down), read by each update: a plain
        # variable, outside the strategy and the checkpoint.
        self._rate_factor = tf.Variable(1.0, trainable=False, name="rate_factor")
        self._agreed_rate_factor = 1.0
        # The factor of every dropout rate (a time budget's sized dropout, models/dropout.py),
        # read by the updates traced while `_scales_dropout` (the first update's choice).
        self._dropout_scale = tf.Variable(1.0, trainable=False, name="dropout_scale")
        self._agreed_dropout_scale = 1.0
        self._scales_dropout = None
        # The weight decay (a time budget's sized weight decay, training/optimizer.py
        # `decaying`), read by the updates traced while `_sizes_weight_decay`.
        self._weight_decay = tf.Variable(0.0, trainable=False, name="weight_decay")
        self._agreed_weight_decay = None
        self._sizes_weight_decay = None
        self.schedule = learning_rate_schedule(hparams)
        self.schedule.rate_factor = self._rate_factor
        with self.strategy.scope():
            self.model = create_model(hparams, vocab_size)
            self.optimizer = create_optimizer(hparams, self.schedule)
            self.optimizer.build(self.model.trainable_variables)
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer)
        self._gradients = (tf.function(self._micro_batch_gradients, jit_compile=True,
                                       autograph=False)
                           if jit_compile else self._micro_batch_gradients)
        self._train_step = None
        self._eval_step = None

    @property
    def step(self):
        """Optimizer updates applied so far."""
        return int(self.optimizer.iterations.numpy())

    def learning_rate(self):
        return float(self.optimizer.learning_rate.numpy())

    def _micro_batch_gradients(self, features, labels):
        """Gradients of one micro-batch's summed (loss-scaled) loss, and its statistics."""
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape, dropout.scaled(
                self._dropout_scale if self._scales_dropout else None):
            logits = self.model(features, training=True)
            stats = batch_statistics(logits, features, labels, self.hparams.label_smoothing)
            scaled_loss = self.optimizer.scale_loss(stats["loss"])
        return [tf.convert_to_tensor(g) for g in tape.gradient(scaled_loss, variables)], stats

    def _replica_step(self, batches, stop):
        variables = self.model.trainable_variables
        gradients, sums = [], None
        for features, labels in batches:
            # One micro-batch after the other, so that memory holds one micro-batch's
            # activations, not all of them.
            with tf.control_dependencies(gradients):
                step_gradients, stats = self._gradients(features, labels)
            if sums is None:
                gradients, sums = step_gradients, stats
            else:
                gradients = [a + b for a, b in zip(gradients, step_gradients)]
                sums = {k: sums[k] + stats[k] for k in sums}
        context = tf.distribute.get_replica_context()
        # The stop requests ride on the step's all-reduce, so every worker sees them at once
        # (placed like the statistics: a tensor from outside the replica has no device), and so
        # does each one's rate factor, dropout scale and weight decay (see train_step).
        stop = tf.zeros_like(sums["tokens"]) + stop
        sums = context.all_reduce(tf.distribute.ReduceOp.SUM, {
            **sums, "stop_requests": stop[0], "out_of_time": stop[1], "rate_factor": stop[2],
            "dropout_scale": stop[3], "weight_decay": stop[4]})
        gradients = [g / tf.maximum(sums["tokens"], 1.0) for g in gradients]
        if self.hparams.clip_grad_norm:
            gradients = self._clip(gradients, context)
        self.optimizer.apply(gradients, variables)
        return sums

    def _clip(self, gradients, context):
        """Clips by the norm of the *summed* gradient, which no single replica holds."""
        total = context.all_reduce(tf.distribute.ReduceOp.SUM, gradients)
        norm = tf.linalg.global_norm(total)
        if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
            norm = norm / self.optimizer.scale_loss(1.0)
        scale = tf.minimum(1.0, self.hparams.clip_grad_norm / norm)
        return [g * scale for g in gradients]

    def train_step(self, iterators, stop=False, out_of_time=False, rate_factor=1.0,
                   dropout_scale=None, weight_decay=None):
        """One optimizer update from `accumulate_steps` batches of each replica's iterator (see
        `distribute`), at the schedule's rate times `rate_factor`, the dropout rates times
        `dropout_scale` and weight decay `weight_decay` (None: as built; the first update
        decides whether the updates take them, since it traces them); returns the statistics
        summed
        over replicas and micro-batches, "stop_requests": how many replicas (of all workers)
        were asked to `stop`, and "out_of_time": how many found the time budget spent.

        On several workers, each one's clock gives a slightly different rate_factor, and
        different rates would make their copies of the weights part: every worker uses the mean
        of the factors of the previous update, which its all-reduce gave them all (and so for
        the dropout scale and the weight decay)."""
        if self._scales_dropout is None:
            self._scales_dropout = dropout_scale is not None
            self._sizes_weight_decay = weight_decay is not None
            # Every worker's first decay is the set's (the rule decides later).
            self._agreed_weight_decay = 0.0 if weight_decay is None else float(weight_decay)
        if self._train_step is None:
            # No AutoGraph, as in Keras's own trainer: the step is Python over Python lists
            # around keras.ops (the same code runs on JAX), and converting its source was a
            # third of a small model's first update (benchmarks/first_update.py).
            @tf.function(autograph=False)
            def step(iterators, stop):
                batches = [[next(iterator) for _ in range(self.hparams.accumulate_steps)]
                           for iterator in iterators.values()]
                per_replica = self.strategy.experimental_distribute_values_from_function(
                    lambda context: batches[context.replica_id_in_sync_group % len(batches)])
                sums = self.strategy.run(self._replica_step, args=(per_replica, stop))
                return self.strategy.experimental_local_results(sums)[0]

            self._train_step = step
        one_worker = self.distribution.workers == 1
        scale = 1.0 if dropout_scale is None else float(dropout_scale)
        self._rate_factor.assign(rate_factor if one_worker else self._agreed_rate_factor)
        self._dropout_scale.assign(scale if one_worker else self._agreed_dropout_scale)
        decay = 0.0 if weight_decay is None else float(weight_decay)
        self._weight_decay.assign(decay if one_worker else self._agreed_weight_decay)
        with decaying(self.optimizer, self._weight_decay if self._sizes_weight_decay else None):
            sums = self._train_step(iterators, tf.constant(
                [float(stop), float(out_of_time), float(rate_factor), scale, decay]))
        sums = {k: float(v) for k, v in sums.items()}
        replicas = self.strategy.num_replicas_in_sync
        self._agreed_rate_factor = sums.pop("rate_factor") / replicas
        self._agreed_dropout_scale = sums.pop("dropout_scale") / replicas
        self._agreed_weight_decay = sums.pop("weight_decay") / replicas
        return sums

    def distribute(self, dataset_fn):
        """{"replica_R": iterator} over `dataset_fn(input_context)` for each local replica R,
        where the context names the replica's share of the data among all replicas."""
        replicas = self.strategy.num_replicas_in_sync
        index, workers = worker_index(self.strategy)
        local = replicas // workers
        return {f"replica_{r}": iter(dataset_fn(tf.distribute.InputContext(replicas, r, replicas)))
                for r in range(index * local, (index + 1) * local)}

    def _resume_state(self, iterators):
        """What a resumed run needs to continue exactly as an uninterrupted one: the dropout
        seeds and each replica's data iterator, kept apart by the number of replicas sharing
        the data (another number divides it otherwise)."""
        seeds = [v.value for v in self.model.variables if "seed_generator_state" in v.path]
        return {"dropout_seeds": seeds, data_key(self.strategy): iterators}

    def evaluate_split(self, problem, split, data_dir, max_batches=None):
        """evaluate() over `split` of `problem` in data_dir, read by tf.data."""
        return self.evaluate(problem.dataset(split, data_dir, self.hparams, training=False),
                             max_batches)

    def restore(self, path):
        """Loads checkpoint `path`'s model and optimizer (not its data position, which train()
        reads): a DamagedCheckpoint where its files do not read back, a ValueError or
        AssertionError where it is another model's."""
        restore_existing(self.checkpoint, path)

    def reload(self):
        """Nothing to do: the update reads the Keras variables, whoever set them (the JAX
        trainer's copies them)."""

    def write_checkpoint(self, directory, step):
        """Saves the model and optimizer as `directory`'s only checkpoint, of `step` (best/, an
        average: see t2t_lite.training.model_dir_copy); returns its path."""
        return checkpoint_writer(self.checkpoint)(directory, step)

    def evaluate(self, dataset, max_batches=None):
        """Loss, perplexity, token accuracy and padding over `dataset` (all of it by default)."""
        if self._eval_step is None:
            # One trace for every batch shape: each shape traced the forward pass again (three
            # traces, most of a small model's first evaluation, with reduce_retracing).
            ids = tf.TensorSpec([None, None], tf.int32)

            @tf.function(input_signature=[{"inputs": ids, "targets": ids}, ids], autograph=False)
            def step(features, labels):
                logits = self.model(features, training=False)
                return batch_statistics(logits, features, labels, self.hparams.label_smoothing)

            self._eval_step = step
        sums = None
        for features, labels in dataset.take(max_batches or -1):
            stats = self._eval_step(features, labels)
            sums = stats if sums is None else {k: sums[k] + stats[k] for k in sums}
        if sums is None:
            raise UserError("the evaluation data set is empty")
        return summarize(sums)

    def train(self, dataset_fn, train_steps, *, checkpoint_dir=None, keep_checkpoints=20,
              resume_from=None, save_every=1000, log_every=100, periodic=(), summary_dir=None,
              budget=None, account=None):
        """Runs updates until `train_steps` have been applied in total (resumed runs included),
        or until the first update that starts after the deadline of `budget` (a
        training.budget.TimeBudget, whose cool-down it follows; on any worker: all stop after
        the same update), with a checkpoint.

        Continues the data where the checkpoint `resume_from` left it (when it holds the data of
        as many replicas), saves a checkpoint in checkpoint_dir every `save_every` updates and
        at the end, and calls each `fn(step)` of `periodic` (every, fn) pairs every `every`
        updates; one that returns True stops training there, after a checkpoint (early
        stopping). Returns the step reached. Stops with TrainingDiverged on a non-finite loss
        without saving, so the last checkpoint is the last good one. On SIGTERM or SIGINT (to
        any worker), every worker saves a checkpoint after the same update and stops with
        Stopped. The time of the updates and saves is counted in `account` (a
        training.time_account.TimeAccount, or None).
        """
        iterators = self.distribute(dataset_fn)
        resume_state = self._resume_state(iterators)
        if resume_from:
            # Only the chief saves: other workers of a multi-worker run restart their data.
            saved = {"/".join(name.split("/")[:2])
                     for name, _ in tf.train.list_variables(resume_from)}
            missing = [r for r in iterators if f"{data_key(self.strategy)}/{r}" not in saved]
            if missing:
                logger.info("%s holds no data position for %s: its data starts afresh",
                            resume_from, ", ".join(missing))
            try:
                tf.train.Checkpoint(**resume_state).restore(resume_from).expect_partial()
            except (IndexError, tf.errors.OpError) as error:
                if not is_damage(error):
                    raise
                # The model and optimizer read back (Runner.trainer restored them): only the
                # order of the data is lost.
                logger.warning("the data position saved in %s is damaged (%s): the data "
                               "starts afresh", resume_from, type(error).__name__)
        state = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, **resume_state)
        checkpoints = None
        if checkpoint_dir:
            remove_partial_saves(checkpoint_dir)
            checkpoints = tf.train.CheckpointManager(state, checkpoint_dir, keep_checkpoints)
        writer = tf.summary.create_file_writer(summary_dir) if summary_dir else None

        def update(stop, out_of_time, rate_factor, dropout_scale, weight_decay):
            sums = self.train_step(iterators, stop, out_of_time, rate_factor, dropout_scale,
                                   weight_decay)
            stopping, out_of_time = sums.pop("stop_requests") > 0, sums.pop("out_of_time") > 0
            return sums, self.step, stopping, out_of_time

        def save_checkpoint():
            if checkpoints is None:
                return None
            return save(checkpoints, self.step, variables_bytes(self.checkpoint))

        def summaries(step, metrics):
            with writer.as_default(step=step):
                for name, value in metrics.items():
                    tf.summary.scalar(name, value)

        return run_updates(update, save_checkpoint, self.learning_rate, step=self.step,
                           train_steps=train_steps, save_every=save_every, log_every=log_every,
                           periodic=periodic, summaries=summaries if writer else None,
                           budget=budget, account=account)
