"""read_scalars gives back what tf.summary wrote, in step order, as TensorBoard shows it."""

import pytest
import tensorflow as tf

from t2t_lite.training.summaries import read_scalars
from t2t_lite.utils.errors import UserError


def write(directory, points):
    writer = tf.summary.create_file_writer(str(directory))
    with writer.as_default():
        for step, loss in points:
            tf.summary.scalar("loss", loss, step=step)
            tf.summary.scalar("accuracy", 1 - loss / 10, step=step)
    writer.close()


def test_every_point_is_read_back_in_step_order(tmp_path):
    points = [(step, 10 / step) for step in range(1, 40)]  # more than TensorBoard samples
    write(tmp_path / "eval", points)

    scalars = read_scalars(str(tmp_path), "eval")

    assert set(scalars) == {"loss", "accuracy"}
    steps, losses = scalars["loss"]
    assert steps == list(range(1, 40))
    assert losses == pytest.approx([loss for _, loss in points], rel=1e-6)
    assert scalars["accuracy"][1] == pytest.approx([1 - loss / 10 for _, loss in points])


def test_a_resumed_run_replaces_the_steps_it_redid(tmp_path):
    write(tmp_path / "train", [(10, 3.0), (20, 2.0), (30, 1.0)])  # killed after step 30
    write(tmp_path / "train", [(20, 2.5), (30, 1.5), (40, 0.5)])  # resumed from step 10

    steps, losses = read_scalars(str(tmp_path))["loss"]

    assert (steps, losses) == ([10, 20, 30, 40], [3.0, 2.5, 1.5, 0.5])


def test_the_order_written_wins_over_the_files_names(tmp_path):
    """TensorFlow names a writer's file by the second and a counter, so the resumed run's
    "...10.v2" sorts before the killed run's "...9.v2" (seen in CI); and a resumed run that has
    not yet reached the killed run's last step drops the points past it, as TensorBoard does."""
    write(tmp_path / "train", [(10, 3.0), (20, 2.0), (30, 1.0)])  # killed after step 30
    (killed,) = (tmp_path / "train").iterdir()
    killed.rename(tmp_path / "train" / "events.out.tfevents.1.host.1.9.v2")
    write(tmp_path / "train", [(20, 2.5)])  # resumed from step 10, now at step 20
    (resumed,) = set((tmp_path / "train").iterdir()) - {
        tmp_path / "train" / "events.out.tfevents.1.host.1.9.v2"}
    resumed.rename(tmp_path / "train" / "events.out.tfevents.1.host.1.10.v2")

    assert read_scalars(str(tmp_path))["loss"] == ([10, 20], [3.0, 2.5])


def test_a_model_dir_without_summaries_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="train a model"):
        read_scalars(str(tmp_path))
    with pytest.raises(UserError, match="train and eval"):
        read_scalars(str(tmp_path), "dev")
