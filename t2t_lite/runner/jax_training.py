"""The training run on Keras's JAX backend: what Runner.train composes on TensorFlow (trainer,
evaluator, keep-best, averaging, the time budget, resuming), with the JAX trainer
(t2t_lite.training.jax_trainer), batches read without TensorFlow and local data parallelism
through keras.distribution.DataParallel. Part of the composing layer: the Runner calls it, and
nothing below it does.
"""

import logging
import time

from t2t_lite.utils.errors import UserError

logger = logging.getLogger("t2t_lite")


def data_parallel(strategy="auto"):
    """Sets Keras's distribution for the trainer's --strategy on JAX: DataParallel over every
    local device (auto, with more than one; mirrored), or none (default, or one device).
    Returns the number of devices a batch is split over."""
    import jax
    import keras

    if strategy == "multi_worker":
        raise UserError("--strategy=multi_worker is TensorFlow's (TF_CONFIG): on JAX, train on "
                        "the local devices (--strategy=auto or mirrored)")
    if strategy not in ("auto", "default", "mirrored"):
        raise UserError(f"unknown --strategy '{strategy}': use auto, default, mirrored or "
                        "multi_worker")
    devices = jax.local_devices()
    if strategy == "default" or (strategy == "auto" and len(devices) == 1):
        keras.distribution.set_distribution(None)
        return 1
    keras.distribution.set_distribution(keras.distribution.DataParallel())  # every device
    return len(devices)


def new_trainer(runner, backend="jax"):
    """A new trainer of `backend` (Keras's) for runner's model, not restored."""
    if backend == "jax":
        from t2t_lite.training.jax_trainer import JaxTrainer

        return JaxTrainer(runner.hparams, runner.vocabulary.size)
    from t2t_lite.training.trainer import Trainer

    return Trainer(runner.hparams, runner.vocabulary.size)


def train_on_jax(runner, config):
    """Runner.train on JAX (see its docstring): returns the final evaluation's metrics."""
    import keras

    from t2t_lite.evaluation.evaluator import Evaluator
    from t2t_lite.training.checkpoint_list import checkpoint_paths, latest_checkpoint
    from t2t_lite.training.jax_trainer import data_devices
    from t2t_lite.training.model_weights import check_resumable
    from t2t_lite.training.scalar_summaries import ScalarWriter

    deadline = time.monotonic() + 60 * config.train_minutes if config.train_minutes else None
    model_dir = runner.model_dir
    if runner.experiment.init_from:
        raise UserError("--init_from (warm start) is TensorFlow's for now: start it with "
                        "KERAS_BACKEND=tensorflow")
    with runner._lock(None):
        latest_checkpoint(model_dir.path, repair=True)
        if config.random_seed is not None:
            keras.utils.set_random_seed(config.random_seed)
        trainer = new_trainer(runner)
        data = runner.problem.numpy_batches("train", runner.data_dir, runner.hparams,
                                            training=True, seed=config.random_seed or 0,
                                            devices=data_devices())
        latest = latest_checkpoint(model_dir.path)
        if latest:
            check_resumable(latest, "jax")
            try:
                position = trainer.restore(latest)
            except (OSError, ValueError) as error:  # cut short, or another model's
                raise UserError(f"cannot resume from {latest} ({error}): a damaged copy, or "
                                "another model's (pass the --data_dir it was trained on)"
                                ) from None
            if position:
                data.position = position
            logger.info("restored %s (step %d)", latest, trainer.step)
        runner._record(trainer.step)
        evaluator = Evaluator(
            runner.problem, runner.translator(trainer.model, engine="jax",
                                              beam_size=config.eval_beam_size),
            runner.data_dir, trainer=trainer, eval_steps=config.eval_steps,
            decode_examples=config.eval_decode_examples, keep_best_by=config.keep_best_by,
            early_stopping=config.early_stopping, min_delta=config.early_stopping_min_delta,
            model_dir=model_dir, output_dir=model_dir, bleu_tokenize=config.bleu_tokenize)
        logger.info("training %s with %s parameters on %d device(s) (JAX), step %d of %d",
                    runner.problem.name, f"{trainer.model.count_params():,}", data_devices(),
                    trainer.step, config.train_steps)
        writer = ScalarWriter(model_dir.summaries("train"))

        def evaluate_before_the_end(step):
            """Returns True to stop training early."""
            if step == config.train_steps:
                return False
            evaluator.evaluate(step, decode=config.decodes_at(step))
            return evaluator.should_stop()

        step = trainer.step
        if not evaluator.should_stop():
            step = trainer.train(
                data, config.train_steps, checkpoint_dir=model_dir.path,
                keep_checkpoints=config.keep_checkpoints, save_every=config.save_interval,
                log_every=config.log_every,
                periodic=[(config.eval_every, evaluate_before_the_end)],
                summaries=writer.scalars, deadline=deadline)
        writer.close()
        metrics = evaluator.final(step)
        if config.average_last or config.average_best:
            chosen, how = evaluator.checkpoints_to_average(
                checkpoint_paths(model_dir.path), last=config.average_last,
                best=config.average_best)
            if chosen:
                evaluator.report_average(model_dir.avg, runner.average(
                    chosen, model_dir.avg, replace=True), chosen, how)
        return metrics
