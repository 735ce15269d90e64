"""A model_dir's life: summaries while training, and resuming where it stopped."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tiny_model_dir import OVERRIDES

from t2t_lite.config import TrainConfig
from t2t_lite.runner import Runner
from t2t_lite.training.optimizer import TransformerSchedule


def train(model_dir, data_dir, steps):
    runner = Runner.create_or_resume(model_dir, "test_short_reverse", "transformer_tiny",
                                     OVERRIDES, data_dir)
    return runner.train(TrainConfig(train_steps=steps, eval_every=0, save_every=3, eval_steps=2,
                                     eval_decode_examples=20, log_every=2))


def scalars(directory, tag):
    events = EventAccumulator(directory, size_guidance={"tensors": 0})
    events.Reload()
    return {e.step: float(tf.make_ndarray(e.tensor_proto)) for e in events.Tensors(tag)}


@pytest.mark.slow  # trains and evaluates: ~10 s
def test_training_writes_the_papers_learning_rate_and_metrics_to_tensorboard(
        tmp_path, short_reverse_data):
    metrics = train(str(tmp_path), short_reverse_data, 6)
    train_dir = str(tmp_path / "train")
    rates = scalars(train_dir, "learning_rate")
    assert sorted(rates) == [2, 4, 6]
    schedule = TransformerSchedule(32, 10, 0.5)
    for step, rate in rates.items():  # logged after `step` updates: the rate of the next one
        assert rate == pytest.approx(float(schedule(step)), rel=1e-5)
    for tag in ("loss", "accuracy", "tokens_per_second", "padding_fraction", "perplexity"):
        assert sorted(scalars(train_dir, tag)) == [2, 4, 6]
    assert scalars(str(tmp_path / "eval"), "sequence_accuracy") == {
        6: pytest.approx(metrics["sequence_accuracy"])}


@pytest.mark.slow  # trains twice: ~20 s
def test_a_second_run_resumes_step_schedule_and_optimizer_state(tmp_path, short_reverse_data,
                                                                caplog):
    data_dir = short_reverse_data
    model_dir = str(tmp_path)
    train(model_dir, data_dir, 3)
    saved = Runner.from_model_dir(model_dir).trainer()
    assert saved.step == 3
    moments = [v.numpy() for v in saved.optimizer.variables]
    assert any(np.abs(m).sum() > 0 for m in moments[2:])  # Adam's m and v are not fresh

    with caplog.at_level("INFO", logger="t2t_lite"):
        train(model_dir, data_dir, 5)
    progress = [r.getMessage().split()[1] for r in caplog.records
                if r.getMessage().startswith("step ")]
    assert progress == ["4/5", "5/5"]  # only the two missing updates were run
    assert sorted(os.path.basename(p) for p in glob.glob(f"{model_dir}/ckpt-*.index")) == [
        "ckpt-3.index", "ckpt-5.index"]
    resumed = Runner.from_model_dir(model_dir).trainer()
    assert resumed.step == 5
    assert resumed.learning_rate() == pytest.approx(float(TransformerSchedule(32, 10, 0.5)(5)))
    resumed.checkpoint.restore(os.path.join(model_dir, "ckpt-3")).expect_partial() \
        .assert_existing_objects_matched()
    for before, variable in zip(moments, resumed.optimizer.variables):
        np.testing.assert_array_equal(before, variable.numpy())
