"""The loop around the updates, one for both trainers (TensorFlow's and JAX's): what stops a run
(a non-finite loss, SIGTERM or SIGINT, the time budget, an early stop), progress and summaries,
when to save, and the periodic evaluations. Each trainer passes its own update and save, so the
rules of a run are written once and hold on either backend.
"""

import logging
import math

from t2t_lite.training.preemption import stop_on_signals
from t2t_lite.training.progress import Progress
from t2t_lite.training.stops import Stopped, TrainingDiverged
from t2t_lite.training.time_account import TimeAccount

logger = logging.getLogger("t2t_lite")


def run_updates(update, save, learning_rate, *, step, train_steps, save_every=1000,
                log_every=100, periodic=(), summaries=None, budget=None, account=None):
    """Calls `update` until `train_steps` updates have been applied in total (resumed runs
    included), or until the first update that starts after the deadline of `budget` (a
    training.budget.TimeBudget, or None), and returns the step reached.

    update(stop_requested, out_of_time, rate_factor, dropout_scale, weight_decay) makes one
    update from `step`, its learning rate times rate_factor (the budget's cool-down; 1 without
    one), its dropout rates times dropout_scale and its weight decay weight_decay (the budget's
    sized regularization; None: as built), and returns (sums, step, stopping, out_of_time): its
    statistics summed, the step after it, and whether any worker was asked to stop or found the
    time budget spent (a trainer on one worker returns the flags it was given; TensorFlow's
    all-reduces them so that every worker stops after the same update).
    An update that leaves the step as it was (float16 gradients overflowed) is not counted.

    save() writes a checkpoint of the current step and returns its path (None: no checkpoint
    directory); it is called every `save_every` updates, when the budget wants a checkpoint to
    average, at the end, and before any stop.
    learning_rate() is the rate logged; summaries(step, metrics), if given, writes the logged
    metrics. Each fn(step) of `periodic` (every, fn) pairs runs every `every` updates; one that
    returns True stops training there, after a checkpoint (early stopping).

    The time of the updates (the first apart) and of the saves is counted in `account` (a
    training.time_account.TimeAccount; None: a new one, unread).

    Raises TrainingDiverged on a non-finite loss without saving, so that the last checkpoint is
    the last good one, and Stopped after a checkpoint on SIGTERM or SIGINT.
    """
    progress = Progress(step, train_steps, budget)
    account = account or TimeAccount()
    first = True

    def timed_save():
        with account.measuring("checkpoints"):
            return save()

    with stop_on_signals() as signals:
        while step < train_steps:
            previous_step = step
            with account.measuring("first update" if first else "updates"):
                sums, step, stopping, out_of_time = update(
                    signals.requested, budget is not None and budget.spent(),
                    budget.rate_factor() if budget else 1.0,
                    budget.dropout_scale() if budget else None,
                    budget.weight_decay() if budget else None)
            first = False
            if not math.isfinite(sums["loss"]):
                raise TrainingDiverged(
                    f"the loss became {sums['loss']} at step {step}; the last good checkpoint "
                    "is kept. Lower learning_rate or raise warmup_steps with --hparams")
            if step == previous_step and not (stopping or out_of_time):
                continue  # float16 gradients overflowed: the update was skipped
            progress.add(sums)
            if budget:
                budget.observe(step, sums["tokens"])
            if step % log_every == 0 or step == train_steps or out_of_time:
                metrics = progress.report(step, learning_rate())
                if summaries:
                    summaries(step, metrics)
            with progress.paused():
                saved = None
                averaging_save = budget is not None and budget.save_due()
                if (step % save_every == 0 or step == train_steps or stopping or out_of_time
                        or averaging_save):
                    saved = timed_save()
                    if budget:
                        budget.saved()
                if stopping:
                    raise Stopped(signals.signal_name, step, saved)
                if out_of_time:
                    logger.info("the time budget (--train_minutes) is spent: training stops at "
                                "step %d of %d", step, train_steps)
                    break
                stop = [fn(step) for every, fn in periodic if every and step % every == 0]
                if any(stop):
                    if step % save_every and step != train_steps:
                        timed_save()
                    break
    return step
