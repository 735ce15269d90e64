"""File-system and process faults: each a one-line error (exit 2) naming the path and the fix,
and nothing a user made lost or left unreadable."""

import glob
import os
import shutil
import stat
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import cli
from t2t_lite.files import temporary_directory, write_text_atomically


def environment(**extra):
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "", **extra}


def run_cli(main, argv, capsys):
    """(exit status, stdout, stderr) of a console script run in this process."""
    code = 0
    try:
        cli.run(main, argv)
    except SystemExit as exit_info:
        code = exit_info.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_atomic_files_and_directories_follow_the_umask(tmp_path, umask_022):
    """Like open() and os.makedirs, not like mkstemp (0600) and mkdtemp (0700), so a server or
    a colleague running as another user can read what was written."""
    path = tmp_path / "hparams.json"
    write_text_atomically(str(path), "{}\n")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(temporary_directory(str(tmp_path), "x")).st_mode) == 0o755
    os.umask(0o077)
    write_text_atomically(str(path), "{}\n")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


SERIALIZE = """
import hashlib
from t2t_lite.data import serialize_example
print(hashlib.sha256(b"".join(serialize_example([i, 5], [i + 2, 7, 1]) for i in range(50)))
      .hexdigest())
"""


def test_examples_serialize_to_the_same_bytes_in_every_process():
    """The feature map's order varied with the process's hash seed, so two datagen runs of one
    corpus wrote shards with different checksums."""
    digests = {subprocess.run([sys.executable, "-c", SERIALIZE], capture_output=True, text=True,
                              check=True, env=environment(PYTHONHASHSEED=str(seed))).stdout
               for seed in range(1, 5)}
    assert len(digests) == 1, digests


OVERRIDES = "d_model=32,d_ff=64,num_heads=4,batch_size=256,warmup_steps=10,learning_rate=0.5"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, short_reverse_data):
    """A model_dir trained for 4 updates with checkpoints at steps 2 and 4; tests copy it."""
    from t2t_lite.runner import Runner

    model_dir = str(tmp_path_factory.mktemp("tiny") / "model")
    runner = Runner.create_or_resume(model_dir, "test_short_reverse", "transformer_tiny",
                                     OVERRIDES, short_reverse_data)
    runner.train(4, seed=3, eval_every=0, save_every=2, eval_steps=1, decode_examples=0)
    return model_dir


@pytest.fixture
def model_copy(tiny_model, tmp_path):
    path = str(tmp_path / "model")
    shutil.copytree(tiny_model, path)
    return path


def train_flags(model_dir, data_dir, steps, *flags):
    return [f"--model_dir={model_dir}", f"--data_dir={data_dir}", f"--train_steps={steps}",
            "--save_every=2", "--eval_every=0", "--eval_steps=1", "--eval_decode_examples=0",
            "--random_seed=3", *flags]


def weights(path):
    reader = tf.train.load_checkpoint(path)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith("model/")}


def test_a_damaged_checkpoint_is_named_and_the_trainer_resumes_before_it(
        model_copy, short_reverse_data, capsys):
    """A truncated .data file (a bad copy): the decoder names it and the newest intact one; the
    trainer warns and resumes from that one, to the same weights the damaged one held."""
    from t2t_lite.cli import decoder, trainer

    original = weights(f"{model_copy}/ckpt-4")
    (data,) = glob.glob(f"{model_copy}/ckpt-4.data-*")
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) // 2)
    source = os.path.join(model_copy, "source.txt")
    write_text_atomically(source, "1 2 3\n")

    code, out, err = run_cli(decoder.main, [f"--model_dir={model_copy}",
                                            f"--decode_from_file={source}"], capsys)
    assert code == 2 and out == "", err
    assert (f"error: checkpoint {model_copy}/ckpt-4 is damaged (Read less bytes than "
            f"requested; a bad copy or sync?): pass --checkpoint_path={model_copy}/ckpt-2, "
            "the newest intact one\n") in err

    code, out, err = run_cli(trainer.main, train_flags(model_copy, short_reverse_data, 4), capsys)
    assert code == 0, err
    assert f"checkpoint {model_copy}/ckpt-4 is damaged" in err
    assert "resuming from the newest intact one before it\n" in err and "(step 2)" in err
    resumed = weights(f"{model_copy}/ckpt-4")
    assert resumed.keys() == original.keys()
    for name in original:
        np.testing.assert_allclose(resumed[name], original[name], rtol=1e-5, atol=1e-6)
