"""File-system and process faults: each a one-line error (exit 2) naming the path and the fix,
and nothing a user made lost or left unreadable."""

import hashlib
import os
import stat
import subprocess
import sys

import pytest

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
