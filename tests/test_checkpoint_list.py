"""The list of a model_dir's checkpoints is read without TensorFlow (checkpoint_list.read_list),
exactly as tf.train.get_checkpoint_state reads it: the same latest checkpoint and paths, and no
list where TensorFlow finds none, for lists TensorFlow and t2t_lite write and damaged ones."""

import os

import pytest
import tensorflow as tf

from t2t_lite.training.checkpoint_list import write_list, read_list


def tensorflow_reads(model_dir):
    """(latest, paths) as TensorFlow reads model_dir's list, or None for none."""
    try:
        state = tf.train.get_checkpoint_state(model_dir)
    except ValueError:  # "Invalid checkpoint state": a list naming no latest checkpoint
        return None
    return state and (state.model_checkpoint_path, list(state.all_model_checkpoint_paths))


def t2t_lite_reads(model_dir):
    listed = read_list(model_dir)
    return listed and (listed.latest, listed.paths)


@pytest.fixture
def model_dir(tmp_path):
    path = tmp_path / 'mödel "dir" \\ 東京'  # escapes and non-ASCII in the saved paths
    path.mkdir()
    return str(path)


def test_a_list_that_checkpoint_manager_wrote(model_dir):
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)), model_dir,
                                         max_to_keep=2)
    for step in (5, 10, 15):
        manager.save(checkpoint_number=step)
    assert t2t_lite_reads(model_dir) == tensorflow_reads(model_dir)
    assert t2t_lite_reads(model_dir)[1] == [os.path.join(model_dir, f"ckpt-{s}")
                                            for s in (10, 15)]


def test_a_list_that_t2t_lite_wrote(model_dir):
    paths = [os.path.join(model_dir, "ckpt-3"), "/elsewhere/ckpt-7"]
    write_list(model_dir, paths)  # relative to model_dir: a moved model_dir keeps its list
    latest, listed = t2t_lite_reads(model_dir)
    assert (latest, listed) == tensorflow_reads(model_dir)
    assert [os.path.normpath(path) for path in listed] == paths


@pytest.mark.parametrize("text", [
    'model_checkpoint_path: "/abs/ckpt-9"\nall_model_checkpoint_paths: "ckpt-8"\n',
    'model_checkpoint_path: "caf\\303\\251/ckpt-1"\n',  # octal UTF-8, as text_format escapes
    'model_checkpoint_path: "a\\"b\\\\c"\nlast_preserved_timestamp: 1.7e+09\n',
    '  model_checkpoint_path :  "ckpt-2"  \n\nall_model_checkpoint_timestamps: 12.5\n',
    'model_checkpoint_path: "ckpt-1"\nmodel_checkpoint_path: "ckpt-2"\n',
    'all_model_checkpoint_paths: "ckpt-1"\n',  # no latest: TensorFlow's ValueError
    'model_checkpoint_path: ""\n',
    "", "\n", "garbage\n", 'model_checkpoint_path: "ckpt-1\n', 'unknown_field: "x"\n',
    "model_checkpoint_path: 5\n",
])
def test_hand_written_and_damaged_lists(model_dir, text):
    with open(os.path.join(model_dir, "checkpoint"), "w", encoding="utf-8") as f:
        f.write(text)
    assert t2t_lite_reads(model_dir) == tensorflow_reads(model_dir)


def test_no_list_and_a_list_that_is_a_directory(model_dir):
    assert t2t_lite_reads(model_dir) is None is tensorflow_reads(model_dir)
    os.mkdir(os.path.join(model_dir, "checkpoint"))
    assert t2t_lite_reads(model_dir) is None is tensorflow_reads(model_dir)
