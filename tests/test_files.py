"""Writes an interruption cannot leave half-done, and the temporaries a killed process leaves:
removed by the next run, never while their process is alive."""

import os
import resource
import signal
import subprocess
import sys
import time

import pytest

from t2t_lite.cli import console
from t2t_lite.export.versions import new_version
from t2t_lite.utils.files import (
    locked_temporary_directory,
    remove_stale_temporaries,
    write_text_atomically,
)


def test_an_atomic_write_that_fails_names_the_file_not_its_temporary(tmp_path):
    """On a full disk (here: a file-size limit) the error named the .tmp-XXXX file, or no
    file at all; the temporary file is removed."""
    path = tmp_path / "out.txt"
    previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, limits[1]))
    try:
        with pytest.raises(OSError) as error:
            write_text_atomically(str(path), "1 2 3\n" * 1000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, previous_handler)
    assert error.value.filename == str(path) and error.value.strerror == "File too large"
    assert console._one_line(error.value).startswith(f"{path}: File too large: check that path")
    assert os.listdir(tmp_path) == []


def killed_while_writing(parent):
    """The temporary directory of a process killed (SIGKILL) inside locked_temporary_directory,
    as an exporter killed mid-write leaves it."""
    process = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from t2t_lite.utils.files import locked_temporary_directory\n"
         f"with locked_temporary_directory({str(parent)!r}, '.tmp-') as path:\n"
         "    open(path + '/half.bin', 'w').write('x')\n"
         "    print(path, flush=True)\n"
         "    time.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True)
    path = process.stdout.readline().strip()
    process.kill()
    process.wait()
    assert os.path.isfile(os.path.join(path, "half.bin"))
    return path


def test_an_export_removes_what_a_killed_export_left_and_keeps_a_running_ones(tmp_path):
    export_dir = tmp_path / "export"
    export_dir.mkdir()
    stale = killed_while_writing(export_dir)
    old_unlocked = export_dir / ".tmp-old"  # killed before it took its lock
    old_unlocked.mkdir()
    os.utime(old_unlocked, (time.time() - 3600,) * 2)
    new_unlocked = export_dir / ".tmp-new"  # being created by another process right now
    new_unlocked.mkdir()
    (export_dir / "unrelated").mkdir()
    with locked_temporary_directory(str(export_dir), ".tmp-") as running:
        version = new_version(str(export_dir), lambda path: os.makedirs(path))
        assert sorted(os.listdir(export_dir)) == sorted(
            [".tmp-new", os.path.basename(running), os.path.basename(version), "unrelated"])
        assert remove_stale_temporaries(str(export_dir), ".tmp-") == []
    assert not os.path.exists(running) and not os.path.exists(stale)
    assert sorted(os.listdir(export_dir)) == sorted(
        [".tmp-new", os.path.basename(version), "unrelated"])
