"""Checkpoints: model-only restore, averaging, the best checkpoint kept by a metric."""

import json

import numpy as np
import pytest
import tensorflow as tf
from cli_output import error_lines

from t2t_lite import cli
from t2t_lite.cli import avg_checkpoints
from t2t_lite.evaluation.evaluator import Evaluator
from t2t_lite.models.transformer import create_model
from t2t_lite.runner import Runner
from t2t_lite.training.checkpoint_list import last_checkpoints

TINY = "num_encoder_layers=1,num_decoder_layers=1,d_model=16,d_ff=32,num_heads=2"


def test_a_checkpoint_restores_every_weight_of_the_model_alone(tmp_path):
    hparams = Runner.create_or_resume(str(tmp_path), "algorithmic_copy", "transformer_tiny",
                                      TINY).hparams
    saved = create_model(hparams, 12)
    path = tf.train.Checkpoint(model=saved).save(str(tmp_path / "model"))
    restored = create_model(hparams, 12)
    tf.train.Checkpoint(model=restored).restore(path).expect_partial() \
        .assert_existing_objects_matched()
    assert len(saved.weights) > 20
    for a, b in zip(saved.weights, restored.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.fixture
def model_dir_with_checkpoints(tmp_path):
    """A model_dir with 4 checkpoints whose weights are different random numbers."""
    runner = Runner.create_or_resume(str(tmp_path / "model"), "algorithmic_copy",
                                     "transformer_tiny", TINY)
    runner.record_experiment()  # as train() would
    trainer = runner.trainer()
    manager = tf.train.CheckpointManager(trainer.checkpoint, runner.model_dir, max_to_keep=10)
    rng = np.random.default_rng(0)
    for step in (100, 200, 300, 400):
        for variable in trainer.model.weights:
            variable.assign(rng.normal(size=variable.shape).astype("float32"))
        trainer.optimizer.iterations.assign(step)
        manager.save(checkpoint_number=step)
    return runner


def checkpoint_values(path):
    reader = tf.train.load_checkpoint(path)
    return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
            if key.endswith("VARIABLE_VALUE") and not key.startswith("save_counter")}


def is_model_weight(key):
    """A checkpoint names each variable by its first path from the root: the model's weights
    are under model/ or, found first, the optimizer's list of the variables it trains."""
    return key.startswith(("model/", "optimizer/_trainable_variables/"))


def test_averaged_weights_are_the_element_wise_mean(model_dir_with_checkpoints, tmp_path):
    runner = model_dir_with_checkpoints
    path = runner.average(last_checkpoints(runner.model_dir, 3), str(tmp_path / "averaged"))
    averaged = checkpoint_values(path)
    last_three = [checkpoint_values(f"{runner.model_dir}/ckpt-{step}")
                  for step in (200, 300, 400)]
    weights = [key for key in averaged if is_model_weight(key)]
    assert len(weights) == len(runner.trainer().model.weights) > 10
    for key, value in averaged.items():
        # The optimizer's state and step are the last checkpoint's.
        expected = (np.mean([c[key] for c in last_three], axis=0) if key in weights
                    else last_three[-1][key])
        np.testing.assert_allclose(value, expected, rtol=1e-6, atol=1e-7, err_msg=key)
    # The result is a model_dir like any other, restorable by every command.
    averaged_runner = Runner.from_model_dir(str(tmp_path / "averaged"))
    assert averaged_runner.trainer().step == 400
    model = averaged_runner.restored_model()
    np.testing.assert_allclose(model.embedding.embeddings.numpy(),
                               averaged["model/embedding/_embeddings/.ATTRIBUTES/VARIABLE_VALUE"])


def run_avg(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.run(avg_checkpoints.main, argv)
    return exit_info.value.code, capsys.readouterr().err


def test_averaging_mistakes_are_one_line_errors(model_dir_with_checkpoints, tmp_path, capsys):
    model_dir = model_dir_with_checkpoints.model_dir
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "file").write_text("x")
    for argv, message in [
        ([f"--model_dir={model_dir}", "--n=5", f"--output_dir={tmp_path}/a"],
         "--n=5 but"),
        ([f"--model_dir={model_dir}", "--n=2", f"--output_dir={tmp_path}/full"],
         "already exists and is not empty"),
        ([f"--model_dir={tmp_path}/none", f"--output_dir={tmp_path}/b"],
         "is not a t2t_lite model_dir"),
    ]:
        code, err = run_avg(argv, capsys)
        assert code == 2 and len(error_lines(err)) == 1 and message in err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_an_average_killed_midway_leaves_nothing_the_next_one_does_not_remove(
        model_dir_with_checkpoints, tmp_path):
    """t2t-lite-avg-checkpoints killed while it wrote left its hidden temporary beside the
    output for good: the next run removes those whose process is gone (their lock is free),
    and the finished output holds no lock file."""
    import fcntl
    import os

    model_dir = model_dir_with_checkpoints.model_dir
    out = tmp_path / "out"
    out.mkdir()
    stale = out / ".averaged-killed"
    stale.mkdir()
    (stale / ".lock").write_text("process 1 on a host that was killed\n")
    (stale / "ckpt-4.index").write_text("half written")
    running = out / ".averaged-running"  # another process's, still writing: kept
    running.mkdir()
    with open(running / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        cli.run(avg_checkpoints.main, [f"--model_dir={model_dir}", "--n=2",
                                       f"--output_dir={out}/averaged"])
    assert sorted(os.listdir(out)) == [".averaged-running", "averaged"]
    assert ".lock" not in os.listdir(out / "averaged")


def test_the_best_checkpoint_by_a_metric_is_kept(model_dir_with_checkpoints):
    runner = model_dir_with_checkpoints
    trainer = runner.trainer()
    best_dir = f"{runner.model_dir}/best"

    def evaluator(keep_best_by):
        return Evaluator(runner.problem, runner.translator(trainer.model), runner.data_dir,
                         trainer=trainer, keep_best_by=keep_best_by, model_dir=runner.model_dir,
                         output_dir=runner.model_dir)

    by_accuracy, by_loss = evaluator("sequence_accuracy"), evaluator("loss")
    embeddings = {}
    for step, accuracy in [(10, 0.5), (20, 0.4), (30, 0.7), (40, 0.7)]:
        trainer.model.embedding.embeddings.assign(
            np.full(trainer.model.embedding.embeddings.shape, step, "float32"))
        embeddings[step] = trainer.model.embedding.embeddings.numpy()
        by_accuracy.keep_if_best(step, accuracy)
        with open(f"{best_dir}/info.json") as f:
            info = json.load(f)
        assert info["step"] == {10: 10, 20: 10, 30: 30, 40: 30}[step]
    model = Runner.from_model_dir(best_dir).restored_model()
    np.testing.assert_array_equal(model.embedding.embeddings.numpy(), embeddings[30])
    by_loss.keep_if_best(50, 2.0)  # another metric replaces the record
    by_loss.keep_if_best(60, 2.5)  # lower is better for the loss
    with open(f"{best_dir}/info.json") as f:
        assert json.load(f) == {"metric": "loss", "value": 2.0, "step": 50}


def _tensorflow_save(model, optimizer, directory, step):
    from t2t_lite.backends.tensorflow import checkpoints

    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model, optimizer=optimizer), directory, max_to_keep=5)
    return checkpoints.save(manager, step, size=0)


def _jax_format_save(model, optimizer, directory, step):
    from t2t_lite.backends.jax import checkpoints  # plain Keras, h5py and numpy: any backend

    return checkpoints.save(model, optimizer, directory, step, position={}, keep=5)


@pytest.mark.parametrize("save", [_tensorflow_save, _jax_format_save])
def test_a_save_replaces_links_at_its_paths_and_never_writes_through_them(save, tmp_path):
    """A model_dir from someone else may hold links where the next checkpoint goes (ckpt-7.*
    pointing outside it): the save replaces the links by its files and leaves their targets as
    they were (TensorFlow wrote its .index through the link)."""
    import keras

    from t2t_lite.training.checkpoint_list import latest_checkpoint

    hparams = Runner.create_or_resume(str(tmp_path / "unused"), "algorithmic_copy",
                                      "transformer_tiny", TINY).hparams
    model, optimizer = create_model(hparams, 12), keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    directory, outside = tmp_path / "model", tmp_path / "outside"
    directory.mkdir()
    outside.mkdir()
    suffixes = ((".index", ".data-00000-of-00001") if save is _tensorflow_save
                else (".weights.h5", ".state.npz"))
    for suffix in suffixes:
        (outside / suffix).write_text("someone else's file")
        (directory / f"ckpt-7{suffix}").symlink_to(outside / suffix)

    path = save(model, optimizer, str(directory), 7)

    assert [p.read_text() for p in sorted(outside.iterdir())] == ["someone else's file"] * 2
    assert path == latest_checkpoint(str(directory)) == str(directory / "ckpt-7")
    for suffix in suffixes:
        assert (directory / f"ckpt-7{suffix}").is_file()
        assert not (directory / f"ckpt-7{suffix}").is_symlink()


def _tensorflow_restore(model, optimizer, path):
    from t2t_lite.backends.tensorflow import checkpoints

    checkpoints.restore_existing(tf.train.Checkpoint(model=model, optimizer=optimizer), path)


def _jax_format_restore(model, optimizer, path):
    from t2t_lite.backends.jax import checkpoints

    checkpoints.restore(model, optimizer, path)


@pytest.mark.parametrize("save, restore", [(_tensorflow_save, _tensorflow_restore),
                                           (_jax_format_save, _jax_format_restore)])
def test_a_checkpoint_resumes_with_a_dropout_turned_on_or_off(save, restore, tmp_path):
    """Dropout layers of rate 0 have no seed, so a resumed run that turns word or attention
    dropout on (training-only hparams) has more model state than its checkpoint: the weights
    and the optimizer's state are restored, the new seeds start fresh (the JAX format refused
    this as another model's until c60ad36). Another model's checkpoint is still refused."""
    import keras

    from t2t_lite.utils.errors import UserError

    hparams = Runner.create_or_resume(str(tmp_path / "unused"), "algorithmic_copy",
                                      "transformer_tiny", TINY).hparams
    built = []
    for changed in ({}, {"word_dropout": 0.1, "attention_dropout": 0.1}, {}):
        model, optimizer = create_model(hparams.replace(**changed), 12), keras.optimizers.Adam()
        optimizer.build(model.trainable_variables)
        built.append((model, optimizer))
    (saved, saved_optimizer), (resumed, resumed_optimizer), (back, back_optimizer) = built
    assert len(resumed.non_trainable_variables) > len(saved.non_trainable_variables)
    rng = np.random.default_rng(0)
    for variable in saved.weights + saved_optimizer.variables[1:]:
        variable.assign(rng.normal(size=variable.shape).astype(variable.dtype))
    saved_optimizer.iterations.assign(7)
    for directory in ("model", "on"):
        (tmp_path / directory).mkdir()
    path = save(saved, saved_optimizer, str(tmp_path / "model"), 7)

    restore(resumed, resumed_optimizer, path)
    for a, b in zip(saved.weights + saved_optimizer.variables,
                    resumed.weights + resumed_optimizer.variables):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    turned_off = save(resumed, resumed_optimizer, str(tmp_path / "on"), 8)
    restore(back, back_optimizer, turned_off)
    assert int(back_optimizer.iterations) == 7

    other = create_model(hparams.replace(num_encoder_layers=2), 12)
    other_optimizer = keras.optimizers.Adam()
    other_optimizer.build(other.trainable_variables)
    with pytest.raises((UserError, ValueError, AssertionError)):
        restore(other, other_optimizer, path)
