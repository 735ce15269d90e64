"""Stopping a trainer cleanly on SIGTERM (what Kubernetes, SLURM and cloud preemption send) or
Ctrl-C: the first signal asks it to save and stop at the next update; a second exits at once.

tf.distribute's PreemptionCheckpointHandler does this only for MultiWorkerMirroredStrategy and
saves through its own CheckpointManager; the trainer's stop is agreed on in its own update step.
"""

import contextlib
import logging
import os
import signal
import threading

logger = logging.getLogger("t2t_lite")

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Which signal asked the process to stop, if one did."""

    def __init__(self):
        self.signal_name = None

    @property
    def requested(self):
        return self.signal_name is not None

    def handle(self, signum, frame):
        name = signal.Signals(signum).name
        if self.requested:  # os.write and os._exit: safe wherever the signal interrupted
            os.write(2, f"second {name}: exiting at once; the last checkpoint is kept\n".encode())
            os._exit(128 + signum)
        self.signal_name = name
        logger.warning("%s: stopping with a checkpoint after this update (send it again to "
                       "exit at once)", name)


@contextlib.contextmanager
def stop_on_signals():
    """A StopRequest that SIGTERM and SIGINT set while the block runs (in the main thread; a
    Python signal handler cannot be installed in another one)."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {number: signal.signal(number, request.handle) for number in SIGNALS}
    try:
        yield request
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
