"""The processes of a multi-host JAX run (jax.distributed): starting them, and what they must
agree on so that every process runs the same computation at every step.

Every process runs the same trainer command. keras.distribution.initialize starts
jax.distributed (the coordinator, the number of processes and this one's index from the
KERAS_DISTRIBUTION_* variables, which the trainer's flags set; on Cloud TPU and under Slurm JAX
finds them itself) and agrees the processes' random seed. After that, jax.devices() are every
process's devices; a jitted computation over arrays laid out on them runs only when every
process calls it with arrays of the same shapes, so what one process decides alone (a
signal, the clock of a time budget, how many batches its data share makes) is shared here
first: one small all-gather (process_allgather) per decision.
"""

import logging

import jax
import numpy as np
from jax.experimental import multihost_utils

from t2t_lite.utils.backend import jax_cluster_requested
from t2t_lite.utils.errors import UserError

logger = logging.getLogger("t2t_lite")
requested = jax_cluster_requested


def initialize():
    """Starts jax.distributed for this process (once), before any JAX computation; a
    cluster that cannot be joined is a UserError naming what to set."""
    import keras

    if jax.distributed.is_initialized():
        return
    try:
        keras.distribution.initialize()
    except (RuntimeError, ValueError) as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        raise UserError(
            f"could not join the JAX cluster ({message}): set --coordinator_address=HOST:PORT "
            "(process 0's), --num_processes and --process_id (or KERAS_DISTRIBUTION_JOB_"
            "ADDRESSES, _NUM_PROCESSES, _PROCESS_ID) on every process; on Cloud TPU and "
            "Slurm JAX finds them itself") from None
    logger.info("process %d of %d of a JAX cluster: %d devices here, %d in all",
                jax.process_index(), jax.process_count(), jax.local_device_count(),
                jax.device_count())


def several():
    """Whether this run spans several processes."""
    return jax.process_count() > 1


def gathered(values):
    """Each process's `values` (numbers), one row per process in process order."""
    values = np.asarray(values, "float64")
    if not several():
        return values[None]
    return np.asarray(multihost_utils.process_allgather(values))


def largest(values):
    """The element-wise maximum of every process's `values` (ints)."""
    return [int(v) for v in gathered(values).max(axis=0)]


def agree_on_stops(stop, out_of_time):
    """Whether any process was asked to stop, and whether any found the time budget spent:
    all stop after the same update (as TensorFlow's trainer all-reduces the same flags)."""
    if not several():
        return stop, out_of_time
    flags = gathered([stop, out_of_time]).max(axis=0)
    return bool(flags[0]), bool(flags[1])


def barrier(name):
    """Waits until every process reaches the barrier `name`."""
    if several():
        multihost_utils.sync_global_devices(name)


class AgreedBudget:
    """A training.budget.TimeBudget whose decisions are process 0's: its clock says when the
    budget is spent, how far the cool-down has gone, the sized dropout and weight decay and when
    to save for averaging, so that every process updates at the same rate and saves the same
    checkpoints."""

    def __init__(self, budget):
        self._budget = budget
        self._rate_factor = 1.0
        self._dropout_scale = budget.dropout_scale()
        self._weight_decay = budget.weight_decay()

    def __getattr__(self, name):  # observe, saved, describe, eta...: this process's budget
        return getattr(self._budget, name)

    def spent(self):
        scale, decay = self._budget.dropout_scale(), self._budget.weight_decay()
        spent, factor, scale, decay = gathered([
            self._budget.spent(), self._budget.rate_factor(), 1.0 if scale is None else scale,
            0.0 if decay is None else decay])[0]
        self._rate_factor = float(factor)
        if self._dropout_scale is not None:
            self._dropout_scale = float(scale)
        if self._weight_decay is not None:
            self._weight_decay = float(decay)
        return bool(spent)

    def rate_factor(self):
        """Process 0's, read by the last spent()."""
        return self._rate_factor

    def dropout_scale(self):
        """Process 0's, read by the last spent() (None without sized dropout)."""
        return self._dropout_scale

    def weight_decay(self):
        """Process 0's, read by the last spent() (None without sized weight decay)."""
        return self._weight_decay

    def save_due(self):
        return bool(gathered([self._budget.save_due()])[0][0])
