"""Progress lines of a long training run: step, loss, accuracy, learning rate, target tokens/s and
ETA, with the time spent checkpointing and evaluating left out of the throughput; with a time
budget, the ETA is the budget's end and the line says how many updates it will allow."""

import contextlib
import logging
import time

from t2t_lite.training.loss import summarize
from t2t_lite.utils.progress import duration

logger = logging.getLogger("t2t_lite")


class Progress:
    """Aggregates statistics between log lines and prints step, loss, lr, tokens/s and ETA;
    time spent checkpointing and evaluating does not count against throughput."""

    def __init__(self, start_step, train_steps, budget=None):
        self.train_steps = train_steps
        self.budget = budget
        self.last_step = start_step
        self.last_time = time.perf_counter()
        self.paused_time = 0.0
        self.sums = None

    def add(self, sums):
        self.sums = sums if self.sums is None else {k: self.sums[k] + sums[k] for k in sums}

    @contextlib.contextmanager
    def paused(self):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.paused_time += time.perf_counter() - start

    def report(self, step, learning_rate):
        now = time.perf_counter()
        elapsed = max(now - self.last_time - self.paused_time, 1e-9)
        metrics = summarize(self.sums)
        metrics["learning_rate"] = learning_rate
        metrics["tokens_per_second"] = self.sums["tokens"] / elapsed
        eta = (self.train_steps - step) * elapsed / max(step - self.last_step, 1)
        ending = ""
        if self.budget is not None:
            final = self.budget.final_step()
            eta = min(eta, self.budget.seconds_left())
            if final is not None and final < self.train_steps:
                ending = f" (the time budget's end, at ~{final:,} updates)"
        logger.info(
            "step %d/%d  loss %.4f  accuracy %.3f  lr %.3g  %s target tokens/s  ETA %s%s",
            step, self.train_steps, metrics["loss"], metrics["accuracy"], learning_rate,
            f"{metrics['tokens_per_second']:,.0f}", duration(eta), ending)
        self.last_step, self.last_time, self.paused_time, self.sums = step, now, 0.0, None
        return metrics

