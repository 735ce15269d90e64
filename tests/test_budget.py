"""A time budget (--train_minutes, t2t_lite/training/budget.py) run by the training loop on a
fake clock: the rate factor is 1 until the cool-down and then the exact linear fall to 0 at the
deadline, the last update is at 0, --average_last's checkpoints lie evenly in the cool-down,
the estimate of the updates the budget allows is what the run makes, and the progress line's
ETA is the budget's end; with sized dropout and weight decay, the rule's choices and when the
run applies them.
No timing: every second here is the fake clock's."""

import logging

import pytest

from t2t_lite.training.budget import TimeBudget
from t2t_lite.config import HParams
from t2t_lite.training.loop import run_updates
from t2t_lite.training.regularization import (
    SUBWORD_SAMPLING_FROM,
    SizedRegularization,
    sized,
    subword_sampling_advice,
    training_tokens,
)



# One update's summed statistics, as the trainers return them.
STATISTICS = {"loss": 20.0, "nll": 18.0, "tokens": 10.0, "correct": 5.0, "source_tokens": 9.0,
              "target_slots": 12.0, "source_slots": 12.0}


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def budget_run(minutes, cooldown, averaged, seconds_per_update, evaluation_seconds=0.0,
               eval_every=0, log_every=50, save_every=10**9, corpus_tokens=None,
               sized_rule=None, start_step=0, suggest_sampling=False):
    """A run of run_updates on a fake clock: each update takes seconds_per_update, each
    evaluation (every eval_every updates) evaluation_seconds. Returns (budget, the updates as
    (clock at their start, rate factor), the steps saved at, and the estimates of the final
    step made at each evaluation); `times` holds the clock at each save, `dropout_scales` and
    `weight_decays` each update's."""
    clock = FakeClock()
    budget = TimeBudget(minutes, cooldown, averaged, clock=clock, corpus_tokens=corpus_tokens,
                        sized=sized_rule, suggest_sampling=suggest_sampling)
    updates, saves, estimates, times, scales, decays = [], [], [], [], [], []
    step = start_step

    def update(stop, out_of_time, rate_factor, dropout_scale, weight_decay):
        nonlocal step
        updates.append((clock.now, rate_factor))
        scales.append(dropout_scale)
        decays.append(weight_decay)
        clock.now += seconds_per_update
        step += 1
        return STATISTICS, step, stop, out_of_time

    def save():
        saves.append(step)
        times.append(clock.now)
        return f"ckpt-{step}"

    def evaluate(at):
        clock.now += evaluation_seconds
        estimates.append((at, budget.final_step()))
        return False

    run_updates(update, save, lambda: 1.0, step=start_step, train_steps=10**9,
                save_every=save_every, log_every=log_every, periodic=[(eval_every, evaluate)],
                budget=budget)
    budget.times, budget.dropout_scales, budget.weight_decays = times, scales, decays
    return budget, updates, saves, estimates


def test_the_rate_cools_down_linearly_to_zero_at_the_deadline():
    budget, updates, _, _ = budget_run(minutes=10, cooldown=0.25, averaged=0,
                                       seconds_per_update=0.7, evaluation_seconds=20,
                                       eval_every=100)
    stretch = 0.25 * 600
    for started, factor in updates:
        left = budget.deadline - started
        assert factor == (1.0 if left >= stretch else pytest.approx(max(0.0, left) / stretch))
    assert updates[-1][1] == 0.0  # the update that starts after the deadline: the floor
    assert updates[-2][1] < 0.7 / stretch + 1e-9  # the one before: within an update of it
    assert sum(factor < 1 for _, factor in updates) > 150  # the cool-down took many updates


def test_the_estimate_of_the_updates_is_the_number_the_budget_allows():
    """Evaluations take time the first estimate cannot know of: the estimate, from the seconds
    per update so far (evaluations included), is refined at each evaluation and comes within
    an evaluation's worth of updates of the number the run makes from the third on."""
    _, updates, _, estimates = budget_run(minutes=30, cooldown=0.2, averaged=0,
                                          seconds_per_update=1.3, evaluation_seconds=40,
                                          eval_every=200)
    errors = [abs(estimate - len(updates)) for _, estimate in estimates]
    assert len(errors) > 5 and errors == sorted(errors, reverse=True), errors
    assert errors[0] > 40 / 1.3 and max(errors[2:]) <= 40 / 1.3, errors


@pytest.mark.parametrize("cooldown", [0.2, 0.0])
def test_average_last_checkpoints_are_spread_evenly_over_the_cool_down(cooldown):
    """--average_last=5: five checkpoints, the last at the deadline, one every fifth of the
    cool-down (the budget's last fifth without one); the rate factor stays 1 without one."""
    budget, updates, saves, _ = budget_run(minutes=20, cooldown=cooldown, averaged=5,
                                           seconds_per_update=0.5)
    assert len(saves) == 5 and saves[-1] == len(updates)
    started = [at for at, _ in updates]
    stretch = (cooldown or 0.2) * 20 * 60
    for k, step in zip(range(4, 0, -1), saves):
        planned = budget.deadline - stretch * k / 5
        # Saved after the first update that ends at or past the planned time.
        assert started[step - 1] + 0.5 >= planned > started[step - 1] + 0.5 - 0.5 - 1e-9
    if not cooldown:
        assert {factor for _, factor in updates} == {1.0}


def test_a_checkpoint_an_evaluation_just_saved_stands_for_a_due_averaging_save():
    """--save_every = --eval_every = 150: the evaluation's own save at 500 s (of 600) and the
    evaluation's 10 s, during which the averaging save planned at 504 s falls due: it is not
    made one update later, and no averaging save comes closer than half the averaging spacing
    (24 s) after another save."""
    spacing = 0.2 * 600 / 5
    budget, updates, saves, _ = budget_run(minutes=10, cooldown=0.2, averaged=5,
                                           seconds_per_update=0.5, evaluation_seconds=10,
                                           eval_every=150, save_every=150)
    times = [t - budget.start for t in budget.times]
    averaging = [i for i, step in enumerate(saves[:-1]) if step % 150]
    assert [round(times[i]) for i in averaging] == [528, 552, 576]  # none at 510.5
    assert 500 in times and saves[-1] == len(updates)
    assert all(times[i] - times[i - 1] >= spacing / 2 for i in averaging), times


def test_the_progress_line_and_the_log_say_where_the_budget_ends(caplog):
    caplog.set_level(logging.INFO, logger="t2t_lite")
    budget, updates, _, _ = budget_run(minutes=2, cooldown=0.2, averaged=4,
                                       seconds_per_update=0.25, log_every=100)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
    assert lines and all("(the time budget's end, at ~" in line for line in lines)
    first = lines[0]  # at step 100, 25 s into 120: the estimate is exact at a steady rate
    assert "ETA 1m35s" in first and f"at ~{len(updates) - 1:,} updates)" in first
    assert budget.describe() == (
        "time budget 2 min: the learning rate falls linearly to 0 over its last 0.4 min "
        "(hparam budget_cooldown=0.2); the 4 checkpoints --average_last averages are saved "
        "every 0.1 min over the last 0.4")


def test_the_rule_gives_the_documented_dropout_for_given_epochs():
    """regularization.py's rule: the set's dropout up to 15 epochs, budget_max_dropout from 35
    on, linear between; never below the set's; off without room to raise it or a count."""
    assert [sized(epochs, 0.1, 0.3) for epochs in (2, 15, 20, 25, 30, 35, 80)] == [
        0.1, 0.1, 0.15, 0.2, 0.25, 0.3, 0.3]
    assert sized(60, 0.3, 0.2) == sized(60, 0.3, 0.0) == 0.3
    stats = {"examples": 3, "target_tokens": 40, "lengths": {"12": 2, "20": 1}}
    assert training_tokens(stats) == 40
    assert training_tokens({"lengths": {"12": 2, "20": 1}}) == 44  # an older datagen's
    assert training_tokens({}) is None
    rule = SizedRegularization.of(HParams(dropout=0.1, budget_max_dropout=0.3),
                                  training_tokens(stats))
    assert (rule.dropout, rule.max_dropout) == (0.1, 0.3)
    assert rule.dropout_scale(25) == pytest.approx(2.0)
    assert rule.weight_decay_for(25) is None  # budget_max_weight_decay 0: not sized
    for hparams, found in ((HParams(dropout=0.1), stats),  # budget_max_dropout 0: off
                           (HParams(dropout=0.0, budget_max_dropout=0.3), stats),
                           (HParams(dropout=0.3, budget_max_dropout=0.3), stats),
                           (HParams(dropout=0.1, budget_max_dropout=0.3), {}),
                           (HParams(weight_decay=0.5, budget_max_weight_decay=0.5), stats),
                           (HParams(budget_max_weight_decay=1.0), {})):
        assert SizedRegularization.of(hparams, training_tokens(found)) is None


def test_the_rule_gives_the_documented_weight_decay_for_given_epochs():
    """Weight decay by the same rule: the set's up to 15 epochs, budget_max_weight_decay from
    35 on, linear between; from a set without weight decay, and with dropout 0 (which the rule
    cannot scale, so dropout is left alone)."""
    rule = SizedRegularization.of(HParams(dropout=0.0, budget_max_weight_decay=1.0), 10**6)
    assert [rule.weight_decay_for(epochs) for epochs in (2, 15, 20, 25, 33, 35, 80)] == [
        0.0, 0.0, 0.25, 0.5, 0.9, 1.0, 1.0]
    assert rule.dropout_scale(40) is None
    both = SizedRegularization.of(HParams(dropout=0.1, budget_max_dropout=0.3, weight_decay=0.2,
                                          budget_max_weight_decay=1.0), 10**6)
    assert (both.dropout_scale(30), both.weight_decay_for(30)) == (pytest.approx(2.5), 0.8)
    assert both.describe(30, 96) == (
        "~30 epochs in the time budget: dropout 0.25 and weight decay 0.8 from step 96 (the "
        "set's 0.1 and 0.2 until then; 15 epochs or fewer keep them, 35 or more raise them to "
        "hparam budget_max_dropout=0.3 and budget_max_weight_decay=1, 0 turns this off)")


@pytest.mark.parametrize("start_step, epochs, dropout", [(0, 30, 0.25), (300, 45, 0.3)])
def test_dropout_is_sized_a_tenth_into_the_budget_by_the_epochs_it_allows(
        caplog, start_step, epochs, dropout):
    """10 minutes at 1 s and 10 target tokens an update on a corpus of 200 tokens: 600 updates,
    30 epochs (45 for a model resumed at step 300: its earlier updates count). The updates run
    at the set's dropout (scale 1) until 60 s in, then at the rule's for those epochs."""
    caplog.set_level(logging.INFO, logger="t2t_lite")
    budget, updates, _, _ = budget_run(minutes=10, cooldown=0.2, averaged=0,
                                       seconds_per_update=1.0, start_step=start_step,
                                       corpus_tokens=200,
                                       sized_rule=SizedRegularization(0.1, 0.3))
    assert len(updates) == 601  # the last starts at the deadline
    decided = 60  # the update that ends 60 s in
    assert budget.dropout_scales[:decided] == [1.0] * decided
    assert budget.dropout_scales[decided:] == [pytest.approx(dropout / 0.1)] * (601 - decided)
    assert (f"~{epochs} epochs in the time budget: dropout {dropout:g} from step "
            f"{start_step + decided} (the set's 0.1 until then" in caplog.text)
    assert budget.describe().endswith("; dropout (hparam budget_max_dropout=0.3) sized by the "
                                      "epochs the budget allows, 10% of the way in")
    assert budget.weight_decays == [None] * 601  # not sized: as the optimizer was built


@pytest.mark.parametrize("start_step, epochs, decay", [(0, 30, 0.75), (300, 45, 1.0)])
def test_weight_decay_is_sized_a_tenth_into_the_budget_by_the_epochs_it_allows(
        caplog, start_step, epochs, decay):
    """The same run as above with weight decay sized instead of dropout: the updates get the
    set's weight decay (0) until 60 s in, then the rule's for the epochs, and no dropout scale
    (the set's dropout stays as built)."""
    caplog.set_level(logging.INFO, logger="t2t_lite")
    budget, updates, _, _ = budget_run(minutes=10, cooldown=0.2, averaged=0,
                                       seconds_per_update=1.0, start_step=start_step,
                                       corpus_tokens=200,
                                       sized_rule=SizedRegularization(0.1, 0.1, 0.0, 1.0))
    decided = 60
    assert budget.weight_decays == [0.0] * decided + [decay] * (601 - decided)
    assert budget.dropout_scales == [None] * 601
    assert (f"~{epochs} epochs in the time budget: weight decay {decay:g} from step "
            f"{start_step + decided} (the set's 0 until then; 15 epochs or fewer keep it, 35 or "
            "more raise it to hparam budget_max_weight_decay=1, 0 turns this off)" in caplog.text)
    assert budget.describe().endswith("; weight decay (hparam budget_max_weight_decay=1) sized "
                                      "by the epochs the budget allows, 10% of the way in")


def test_without_sized_dropout_the_updates_get_no_scale():
    budget, updates, _, _ = budget_run(minutes=1, cooldown=0.2, averaged=0,
                                       seconds_per_update=1.0)
    assert budget.dropout_scales == budget.weight_decays == [None] * len(updates)


@pytest.mark.parametrize("start_step, epochs", [(0, 30), (300, 45)])
def test_the_epochs_the_budget_allows_are_logged_a_tenth_in_without_sized_dropout(
        caplog, start_step, epochs):
    """The set's runs (no sized dropout) still say how many epochs the budget allows: 10 minutes
    at 1 s and 10 target tokens an update (STATISTICS) on a corpus of 200 tokens are 600
    updates, 30 epochs (45 resumed at step 300), told once, when the update ending 60 s in is
    done; without the corpus's token count nothing is told."""
    caplog.set_level(logging.INFO, logger="t2t_lite")
    budget, updates, _, _ = budget_run(minutes=10, cooldown=0.2, averaged=0,
                                       seconds_per_update=1.0, start_step=start_step,
                                       corpus_tokens=200)
    told = [record.getMessage() for record in caplog.records if "epochs in" in record.getMessage()]
    assert told == [f"~{epochs} epochs in the time budget: ~{start_step + 600:,} updates in all "
                    "of ~10 target tokens, against the training split's 200"]
    assert budget.dropout_scales == [None] * len(updates)
    caplog.clear()
    budget_run(minutes=10, cooldown=0.2, averaged=0, seconds_per_update=1.0)
    assert "epochs in" not in caplog.text


@pytest.mark.parametrize("minutes, suggest, epochs", [
    (15, True, None), (15.2, True, 46), (16, True, 48), (16, False, None)])
def test_a_budget_of_many_epochs_suggests_bpe_dropout_once_on_data_without_it(
        caplog, minutes, suggest, epochs):
    """At 1 s and 10 target tokens an update on a corpus of 200 tokens, 15 minutes are 45
    epochs (900 updates), 15.2 are 45.6, logged as ~46, and 16 are 48: from
    SUBWORD_SAMPLING_FROM (46) epochs as logged, a run on data that could have been written with
    BPE-dropout and was not suggests it, once, right after the epochs; otherwise nothing."""
    assert SUBWORD_SAMPLING_FROM == 46
    caplog.set_level(logging.INFO, logger="t2t_lite")
    budget_run(minutes=minutes, cooldown=0.2, averaged=0, seconds_per_update=1.0,
               corpus_tokens=200, suggest_sampling=suggest)
    told = [record.getMessage() for record in caplog.records if "epochs" in record.getMessage()]
    advice = [line for line in told if "--bpe_dropout" in line]
    if epochs is None:
        assert len(told) == 1 and not advice
        return
    assert told[0].startswith(f"~{epochs} epochs in the time budget:")
    assert advice == [told[1]] == [subword_sampling_advice(epochs)]
    assert advice[0].startswith("at 46 epochs or more, datagen's --bpe_dropout=0.05 was ahead")
    assert subword_sampling_advice(45.49) is None and subword_sampling_advice(45.6) is not None
