"""Where a run's time went (t2t_lite/training/time_account.py), counted by the training loop on a
fake clock: each part's seconds and count are exactly those the fake updates, saves and
evaluations took, the first update apart, and the line's shares are of the whole run. No
timing: every second here is the fake clock's."""

import pytest

from t2t_lite.training.loop import run_updates
from t2t_lite.training.time_account import TimeAccount

STATISTICS = {"loss": 20.0, "nll": 18.0, "tokens": 10.0, "correct": 5.0, "source_tokens": 9.0,
              "target_slots": 12.0, "source_slots": 12.0}


class FakeClock:
    def __init__(self):
        self.now = 500.0

    def __call__(self):
        return self.now


def test_the_loop_counts_updates_saves_and_evaluations_exactly():
    clock = FakeClock()
    account = TimeAccount(clock)
    clock.now += 30  # start-up: reading data, building the model
    step = 0

    def update(stop, out_of_time, rate_factor, dropout_scale, weight_decay):
        nonlocal step
        with account.measuring("input"):
            clock.now += 0.5
        clock.now += 20 if step == 0 else 1.5  # the first traces and compiles
        step += 1
        return STATISTICS, step, stop, out_of_time

    def save():
        clock.now += 4
        return f"ckpt-{step}"

    def evaluate(at):
        with account.measuring("evaluations"):
            clock.now += 10
        return False

    reached = run_updates(update, save, lambda: 1.0, step=0, train_steps=100, save_every=25,
                          log_every=1000, periodic=[(20, evaluate)], account=account)
    assert reached == 100
    with account.measuring("final evaluation"):
        clock.now += 12
    with account.measuring("averaging"):
        clock.now += 6

    assert account.counts["first update"] == 1 and account.seconds["first update"] == 20.5
    assert account.counts["updates"] == 99 and account.seconds["updates"] == 99 * 2.0
    assert account.counts["input"] == 100 and account.seconds["input"] == 50.0
    # Saves every 25 updates (the last one at step 100 among them); evaluations at 20, 40, 60, 80
    # and 100 (the loop calls the periodic at the last step too; the runner's skips it there).
    assert account.counts["checkpoints"] == 4 and account.seconds["checkpoints"] == 16.0
    assert account.counts["evaluations"] == 5 and account.seconds["evaluations"] == 50.0
    total = 30 + 20.5 + 198 + 16 + 50 + 12 + 6
    assert clock.now - 500 == total and account.rest() == pytest.approx(30.0)
    assert account.describe() == (
        "the run's 5m32s: first update 0m20s (6%), updates 3m18s (60%, 99 of them), "
        "evaluations 0m50s (15%, 5), checkpoints 0m16s (5%, 4), final evaluation 0m12s (4%), "
        "averaging 0m06s (2%), input 0m50s (within the updates), "
        "the rest 0m30s (9%: start-up, logs, summaries)")


def test_only_parts_measured_are_named_and_an_unknown_part_is_refused():
    clock = FakeClock()
    account = TimeAccount(clock)
    with account.measuring("updates"):
        clock.now += 90
    clock.now += 10
    assert account.describe() == (
        "the run's 1m40s: updates 1m30s (90%, 1 of them), "
        "the rest 0m10s (10%: start-up, logs, summaries)")
    with pytest.raises(ValueError, match="unknown part 'compiling'"):
        with account.measuring("compiling"):
            pass
