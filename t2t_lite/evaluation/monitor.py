"""Monitor: which value of an evaluation metric is better, decided once for keeping the best
checkpoint, early stopping and averaging the best checkpoints (as Keras's MonitorCallback decides
it for ModelCheckpoint and EarlyStopping)."""

# Teacher-forced metrics every evaluation reports where lower is better; a problem names its own.
LOWER_IS_BETTER = ("loss", "perplexity")


class Monitor:
    """Watches `metric`; an improvement beats the reference by more than `min_delta`."""

    def __init__(self, metric, lower_is_better, min_delta=0.0):
        self.metric = metric
        self.lower_is_better = lower_is_better
        self.min_delta = min_delta

    @classmethod
    def of_problem(cls, metric, problem, min_delta=0.0):
        """A Monitor of `metric` as `problem` (and the teacher-forced metrics) rank it."""
        lower = LOWER_IS_BETTER + tuple(problem.lower_is_better)
        return cls(metric, metric in lower, min_delta)

    def improves(self, value, reference, min_delta=None):
        """Whether `value` beats `reference` (None: nothing to beat) by more than min_delta
        (default: the Monitor's)."""
        if reference is None:
            return True
        sign = -1 if self.lower_is_better else 1
        return sign * (value - reference) > (self.min_delta if min_delta is None else min_delta)

    def ranked(self, history):
        """The evaluations of `history` ({"step", "metrics"} entries) that report the metric,
        best first; the earlier first among equals."""
        sign = 1 if self.lower_is_better else -1
        return sorted((entry for entry in history if self.metric in entry["metrics"]),
                      key=lambda entry: (sign * entry["metrics"][self.metric], entry["step"]))

    def evaluations_without_improvement(self, values):
        """How many of the last `values` did not improve on the best value before them
        (OpenNMT-tf's early stopping rule)."""
        best, count = None, 0
        for value in values:
            if self.improves(value, best):
                best, count = value, 0
            else:
                count += 1
        return count
