"""Where a training run's wall-clock time went: updates (the first, which traces and compiles,
apart), evaluations, checkpoints, the final evaluation and average, and the rest (start-up,
logs). A run with `--train_minutes` buys a number of updates with its hour; this says how much of
the hour bought them and what took the rest, as fairseq's `wall` and `train_wall` meters do, in
one log line at the end of training.
"""

import collections
import contextlib
import time

from t2t_lite.utils.progress import duration

# The parts measured, in the order the line names them, and those within them (counted in the
# parts above too): "input", the time the updates waited for their batches where a trainer reads
# them outside the compiled update (JAX's; TensorFlow's prefetches them inside it).
PARTS = ("first update", "updates", "evaluations", "checkpoints", "final evaluation",
         "averaging")
WITHIN = ("input",)


class TimeAccount:
    """Seconds and counts of each part of a run, from the account's creation; `clock` is
    time.monotonic (a test's fake)."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.start = clock()
        self.seconds = collections.Counter()
        self.counts = collections.Counter()

    @contextlib.contextmanager
    def measuring(self, part):
        """Counts the time in the `with` block as one of `part` (one of PARTS, or of WITHIN)."""
        if part not in PARTS and part not in WITHIN:
            raise ValueError(f"unknown part {part!r} of a run's time")
        start = self.clock()
        try:
            yield
        finally:
            self.seconds[part] += self.clock() - start
            self.counts[part] += 1

    def rest(self):
        """Seconds since the start in none of PARTS: start-up (reading data, restoring,
        building the model), progress lines and summaries."""
        return self.clock() - self.start - sum(self.seconds[part] for part in PARTS)

    def describe(self):
        """One line: the total, then each part with its share of the total and its count."""
        total = max(self.clock() - self.start, 1e-9)

        def share(seconds):
            return f"{duration(seconds)} ({100 * seconds / total:.0f}%"

        described = []
        for part in PARTS:
            if not self.counts[part]:
                continue
            text = f"{part} {share(self.seconds[part])}"
            if part == "updates":
                text += f", {self.counts[part]:,} of them"
            elif part in ("evaluations", "checkpoints"):
                text += f", {self.counts[part]:,}"
            described.append(text + ")")
        described += [f"{part} {duration(self.seconds[part])} (within the updates)"
                      for part in WITHIN if self.counts[part]]
        described.append(f"the rest {share(self.rest())}: start-up, logs, summaries)")
        return f"the run's {duration(total)}: " + ", ".join(described)
