"""Datagen and the exporter on a disk that refuses writes midway: one line naming the directory,
the cause and the fix (exit 2), and nothing half-written left behind, where TensorFlow's
OutOfRangeError/ResourceExhaustedError tracebacks were.

A file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored) makes the real writes fail with EFBIG
partway, as a full disk fails them with ENOSPC; both take the same path (write_failure), whose
messages for each cause are tested on their own."""

import contextlib
import errno
import glob
import os
import re
import resource
import signal

from cli_output import error_lines, run_cli

from t2t_lite.utils.files import write_failure


@contextlib.contextmanager
def file_size_limit(size):
    previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, limits[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, previous_handler)


def test_datagen_past_a_file_size_limit_is_one_line_and_leaves_no_shard(tmp_path, capsys):
    from t2t_lite.cli import datagen

    data_dir = str(tmp_path / "data")
    flags = ["--problem=test_short_reverse", f"--data_dir={data_dir}"]
    with file_size_limit(100_000):  # a train shard is about 620 kB
        code, _, err = run_cli(datagen.main, flags, capsys)
    (line,) = error_lines(err)
    assert code == 2 and "Traceback" not in err
    assert line.startswith(f"t2t-lite: error: cannot write the train data of "
                           f"test_short_reverse in {data_dir} ({data_dir}/test_short_reverse-"
                           "train-0000"), line
    assert line.endswith("File too large): it writes files, over a file-size limit there "
                         "(`ulimit -f`, or the file system's); raise it and run the same "
                         "command again"), line
    assert not glob.glob(f"{data_dir}/*-train-*")  # neither shards nor .incomplete ones

    code, _, err = run_cli(datagen.main, flags, capsys)
    assert code == 0 and "test_short_reverse is ready" in err, err


def test_export_past_a_file_size_limit_is_one_line_and_leaves_no_version(model_copy, capsys):
    from t2t_lite.cli import exporter

    export_dir = f"{model_copy}/export"
    (weights,) = glob.glob(f"{model_copy}/ckpt-4.data-*")
    with file_size_limit(os.path.getsize(weights) // 10):  # Adam makes it 3x the model
        code, _, err = run_cli(exporter.main, [f"--model_dir={model_copy}"], capsys)
    (line,) = error_lines(err)
    assert code == 2 and "Traceback" not in err
    assert line.startswith(f"t2t-lite: error: cannot export in {export_dir} ("), line
    assert "File too large): it writes files, over a file-size limit there" in line, line
    assert os.listdir(export_dir) == []  # no version, no .tmp- directory

    code, out, err = run_cli(exporter.main, [f"--model_dir={model_copy}"], capsys)
    assert code == 0, err
    (version,) = os.listdir(export_dir)  # its phases are logged, as a big model takes minutes
    assert re.search(rf"writing version {version} of {export_dir}\n.*\n?.*wrote "
                     rf"{export_dir}/{version} in 0m\d\ds\n", err), err
    assert out == f"exported {export_dir}/{version}\n"


def test_write_failures_name_the_fix_of_their_cause(tmp_path):
    """No space (errno or TensorFlow's text), a permission, a file-size limit; any other error
    is not a write refusal and is left to its caller."""
    directory = str(tmp_path)
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f"{directory}/x")
    assert write_failure(full, "export", directory) == (
        f"cannot export in {directory} ({directory}/x: No space left on device): free some "
        "space and run the same command again")
    assert write_failure(full, "export", directory, size=3 * 2**20).endswith(
        "): it needs 3.0 MiB free there; free some space and run the same command again")
    text = RuntimeError("{{function_node f}} x.tfr; Disk quota exceeded [Op:WriteFile]")
    assert write_failure(text, "write", directory) == (
        f"cannot write in {directory} (x.tfr; Disk quota exceeded): free some space and run "
        "the same command again")
    denied = PermissionError(errno.EACCES, os.strerror(errno.EACCES), f"{directory}/x")
    assert write_failure(denied, "export", directory).endswith(
        "Permission denied): make it writable and run the same command again")
    assert write_failure(ValueError("a bad line"), "export", directory) is None
