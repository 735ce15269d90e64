"""A time budget for training (`--train_minutes`): when the run stops, how its learning rate
ends, where the checkpoints to average lie, and how many updates it will have made.

A run that stops at a deadline on the paper's inverse-square-root schedule stops at a high rate,
with its last checkpoints far apart in what they learned. So over the budget's last
`cooldown` fraction (hparam budget_cooldown) the rate falls linearly to zero, reaching it at the
deadline, as the "warmup-stable-decay" schedules do (Hägele et al. 2024, "Scaling Laws and
Compute-Optimal Training Beyond Fixed Training Durations": a 10-20% cool-down matches a cosine
schedule fitted to the length); and `--average_last=N` saves its N checkpoints evenly over that
stretch, the last at the deadline. Both are measured in time, not updates, so evaluations and
saves that take time cannot move the end: the rate is ~0 at the last update whatever the
update rate was. The number of updates the budget allows is estimated from the wall-clock
seconds per update so far (evaluations and saves included) for the progress line and the logs.

Given the training split's target tokens, the budget also says, a tenth of the way in, how many
epochs it allows (logged: how often the model will see each example is what the published
small-corpus recipes are sized by); with a training.regularization.SizedRegularization, from
then on also the factor by which every dropout rate is multiplied and the weight decay.

Each run's budget is its own: a resumed run with `--train_minutes=M` continues the schedule from
its step, cools down again over the end of its own M minutes and sizes the regularization by
the epochs the model will have trained by then, its earlier runs' included.
"""

import logging
import math
import time

from t2t_lite.training.regularization import DECIDE_AT, subword_sampling_advice

logger = logging.getLogger("t2t_lite")

# Where --average_last's checkpoints go when the cool-down is off: the budget's last fifth.
AVERAGING_STRETCH = 0.2


class TimeBudget:
    """The budget of one run, from its creation; `clock` is time.monotonic (a test's fake)."""

    def __init__(self, minutes, cooldown=0.2, averaged=0, clock=time.monotonic,
                 corpus_tokens=None, sized=None, suggest_sampling=False):
        self.clock = clock
        self.seconds = 60.0 * minutes
        self.start = clock()
        self.deadline = self.start + self.seconds
        self.cooldown = cooldown
        self.averaged = averaged
        self._stretch = (cooldown or AVERAGING_STRETCH) * self.seconds  # the averaging saves'
        # The N-1 saves before the one at the deadline (the loop saves there anyway).
        self._saves = [self.deadline - self._stretch * k / averaged
                       for k in range(averaged - 1, 0, -1)]
        self._spacing = self._stretch / averaged if averaged else 0.0
        self._last_save = -math.inf
        self._first = self._last = None  # (time, step) after the first and the last update
        self.corpus_tokens = corpus_tokens  # the training split's target tokens, EOS included
        self.sized = sized  # a SizedRegularization; needs corpus_tokens
        # Whether the data could have been written with BPE-dropout and was not: then the
        # epochs, once known, may suggest it (regularization.subword_sampling_advice).
        self.suggest_sampling = suggest_sampling
        self._tokens = 0.0  # target tokens trained since the first timed update
        self._epochs = None  # as estimated a tenth of the way in
        self._epochs_told = not corpus_tokens

    def spent(self):
        return self.clock() >= self.deadline

    def seconds_left(self):
        return max(0.0, self.deadline - self.clock())

    def rate_factor(self):
        """What the learning rate is multiplied by now: 1 until the cool-down, then falling
        linearly to 0 at the deadline."""
        if not self.cooldown:
            return 1.0
        return min(1.0, self.seconds_left() / (self.cooldown * self.seconds))

    def save_due(self):
        """True once for each averaging save whose time has come, unless a checkpoint was saved
        less than half a spacing ago (e.g. by an evaluation's save): that one stands for it."""
        due = False
        while self._saves and self.clock() >= self._saves[0]:
            self._saves.pop(0)
            due = True
        return due and self.clock() - self._last_save >= self._spacing / 2

    def saved(self):
        """Notes that a checkpoint was saved now."""
        self._last_save = self.clock()

    def dropout_scale(self):
        """What every dropout rate is multiplied by now (None: dropout is not sized)."""
        if not (self.sized and self.sized.sizes_dropout):
            return None
        return 1.0 if self._epochs is None else self.sized.dropout_scale(self._epochs)

    def weight_decay(self):
        """The weight decay now (None: weight decay is not sized, the optimizer's as built)."""
        if not (self.sized and self.sized.sizes_weight_decay):
            return None
        if self._epochs is None:
            return self.sized.weight_decay
        return self.sized.weight_decay_for(self._epochs)

    def observe(self, step, tokens=0.0):
        """Notes that `step` was reached now (after each update), which trained `tokens` target
        tokens; a tenth of the way into the budget, logs the epochs it allows and sizes the
        regularization by them."""
        self._last = (self.clock(), step)
        if self._first is None:
            self._first = self._last
        else:
            self._tokens += tokens
        if not self._epochs_told and self._last[0] - self.start >= DECIDE_AT * self.seconds:
            epochs = self.epochs()
            if epochs is not None:
                self._epochs_told = True
                if self.sized:
                    self._epochs = epochs
                    logger.info(self.sized.describe(epochs, step))
                else:
                    logger.info(self.describe_epochs(epochs))
                advice = self.suggest_sampling and subword_sampling_advice(epochs)
                if advice:
                    logger.info(advice)

    def final_step(self):
        """The step the run will reach by the deadline at its rate so far (evaluations and saves
        included), or None before two updates were timed."""
        if self._first is None or self._last[1] == self._first[1]:
            return None
        (start, first), (last, step) = self._first, self._last
        per_update = (last - start) / (step - first)
        return step + math.floor(self.seconds_left() / per_update)

    def epochs(self):
        """The epochs of the training split the model will have trained by the deadline: all
        its updates by then, those of earlier runs included, at this run's target tokens an
        update; None before two updates were timed or without the split's token count."""
        final = self.final_step()
        if final is None or not self._tokens or not self.corpus_tokens:
            return None
        return final * self._tokens_per_update() / self.corpus_tokens

    def _tokens_per_update(self):
        return self._tokens / (self._last[1] - self._first[1])

    def describe_epochs(self, epochs):
        """The log line of the epochs the budget allows, and what they are made of."""
        return (f"~{epochs:.0f} epochs in the time budget: ~{self.final_step():,} updates in all "
                f"of ~{self._tokens_per_update():,.0f} target tokens, against the training "
                f"split's {self.corpus_tokens:,}")

    def describe(self):
        """One line for the log: the budget, its cool-down and where the average's checkpoints
        go."""
        minutes = self.seconds / 60
        text = f"time budget {minutes:g} min"
        if self.cooldown:
            text += (f": the learning rate falls linearly to 0 over its last "
                     f"{self.cooldown * minutes:.3g} min (hparam budget_cooldown="
                     f"{self.cooldown:g})")
        if self.averaged > 1:
            stretch = self._stretch / 60
            text += (f"; the {self.averaged} checkpoints --average_last averages are saved every "
                     f"{stretch / self.averaged:.3g} min over the last {stretch:.3g}")
        if self.sized:
            knobs = " and ".join(f"{name} (hparam {hparam}={most:g})"
                                 for name, hparam, _, most in self.sized.knobs())
            text += (f"; {knobs} sized by the epochs the budget allows, {DECIDE_AT:.0%} of the "
                     f"way in")
        return text
