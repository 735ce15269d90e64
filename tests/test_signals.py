"""Ctrl-C and a closed pipe: the console scripts end as Unix tools do, in one line or none, and
leave nothing half-written (real processes, real signals)."""

import errno
import glob
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
USR_PROBLEMS = os.path.join(TESTS, "usr_problems.py")

# A problem whose datagen writes a few examples, then waits to read the FIFO $T2T_TEST_FIFO.
BLOCKED_PROBLEM = """
import os
import time
from t2t_lite.problems.algorithmic import AlgorithmicReverse
from t2t_lite.registry import register_problem


@register_problem(name="test_blocked_reverse")
class BlockedReverse(AlgorithmicReverse):
    num_examples = {"train": 100, "dev": 10, "test": 10}
    num_shards = {"train": 2, "dev": 1, "test": 1}

    def text_pairs(self, split, raw_dir):
        pairs = super().text_pairs(split, raw_dir)
        for _ in range(5):
            yield next(pairs)
        # Waits in Python, not in one read(): SIGINT may land on one of TensorFlow's threads,
        # which does not interrupt a main thread blocked in a system call; Python runs the
        # handler once the main thread runs Python code (as datagen's own work does).
        with open(os.environ["T2T_TEST_FIFO"], "rb", buffering=0) as f:
            os.set_blocking(f.fileno(), False)
            while f.read() != b"":
                time.sleep(0.05)
        yield from pairs
"""


def start(script, *flags, sigint=signal.SIG_DFL, **popen):
    """A console script (t2t-lite-SCRIPT) started as a shell would start it: its stderr shows
    what a user sees (TF_CPP_MIN_LOG_LEVEL unset, so its start-up is quiet). SIGINT is left as a
    terminal's shell leaves it, or with `sigint=signal.SIG_IGN` as a script's shell leaves its
    background jobs (`cmd &`)."""
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    environment["CUDA_VISIBLE_DEVICES"] = ""
    environment["PYTHONFAULTHANDLER"] = "1"  # SIGABRT prints every thread's stack: see interrupt
    code = (f"import sys; sys.argv[0] = 't2t-lite-{script}'; "
            f"from t2t_lite.cli.{script} import run; run()")
    return subprocess.Popen([sys.executable, "-c", code, *flags], stderr=subprocess.PIPE,
                            env={**environment, **popen.pop("env", {})},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint), **popen)


def wait_until_reading(fifo, process, timeout=300):
    """Opens the FIFO `fifo` for writing once `process` opened it to read (it then waits for
    data), so that a signal comes while it reads; fails if the process ends first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as error:
            if error.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"it never read {fifo}: {process.communicate()[1].decode()[-3000:]}")
        time.sleep(0.1)


def interrupt(process, fifo=None):
    """Sends SIGINT (what Ctrl-C sends) to `process` (while it reads `fifo`); returns its exit
    status and stderr."""
    writer = wait_until_reading(fifo, process) if fifo else None
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)  # where it waits, for the failure's message
        pytest.fail("still running 60 s after SIGINT; its threads' stacks: "
                    + process.communicate(timeout=60)[1].decode()[-6000:])
    finally:
        if writer is not None:
            os.close(writer)
        if process.poll() is None:
            process.kill()
    return process.returncode, process.stderr.read().decode()


def assert_interrupted(code, err, script):
    """Exit status 130 (128 + SIGINT) and one line, after the progress log lines (a clock
    time first)."""
    lines = err.splitlines()
    assert code == 130 and "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert lines[-1] == f"t2t-lite-{script}: interrupted", err
    assert all(line[:8].count(":") == 2 for line in lines[:-1]), err


def test_console_scripts_import_tensorflow_only_inside_cli_run(tmp_path):
    """A module a console script names is imported before cli.run can catch anything: if it
    imported TensorFlow (seconds), Ctrl-C meanwhile would be a traceback."""
    scripts = sorted(os.path.splitext(os.path.basename(path))[0]
                     for path in glob.glob(os.path.join(TESTS, "..", "t2t_lite", "cli", "*.py"))
                     if not path.endswith("__init__.py"))
    code = ("import importlib, sys\n"
            f"for name in {scripts!r}:\n"
            "    importlib.import_module('t2t_lite.cli.' + name)\n"
            "    assert 'tensorflow' not in sys.modules, name\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0 and "decoder" in scripts, result.stderr[-2000:]


def test_ctrl_c_while_the_decoder_reads_its_input(trained_reverse, tmp_path):
    """Start-up: the input file is read before the model is loaded."""
    fifo = str(tmp_path / "source.txt")
    os.mkfifo(fifo)
    process = start("decoder", f"--model_dir={trained_reverse.model_dir}",
                    f"--usr_dir={USR_PROBLEMS}", f"--decode_from_file={fifo}",
                    f"--decode_to_file={tmp_path / 'out.txt'}")
    assert_interrupted(*interrupt(process, fifo), "decoder")
    assert os.listdir(tmp_path) == ["source.txt"]


def test_a_signal_taken_by_another_thread_still_ends_a_wait_for_input():
    """Any thread that does not block a process-wide signal may take it (numpy's and TensorFlow's
    pools do not); CPython then runs the handler in the main thread, but only once that runs
    Python code again. Waiting on a pipe in slices is what lets Ctrl-C end a decoder waiting for
    its input then (a real signal, sent to a helper thread here so that it lands there)."""
    from t2t_lite.data.corpus import lines_as_they_come

    class Interrupted(Exception):
        pass

    def handler(signum, frame):
        raise Interrupted

    read_end, write_end = os.pipe()
    seen, missed = threading.Event(), []

    def signal_from_another_thread():
        time.sleep(0.5)  # the main thread waits for input by now
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)  # taken by this thread
        if not seen.wait(timeout=10):
            missed.append(True)
        os.close(write_end)  # a reader that missed it gets its end of file: the test ends

    previous = signal.signal(signal.SIGUSR1, handler)
    thread = threading.Thread(target=signal_from_another_thread)
    try:
        thread.start()
        with open(read_end, "rb") as f, pytest.raises(Interrupted):
            try:
                next(lines_as_they_come(f, wake_every=0.05))
            except Interrupted:
                seen.set()
                raise
    finally:
        thread.join()
        signal.signal(signal.SIGUSR1, previous)
    assert not missed, "the main thread read on for 10 s after the signal"


def test_ctrl_c_ends_the_interactive_decoder(trained_reverse):
    """Ctrl-C is how a user leaves the decoder reading stdin; what it translated stays."""
    process = start("decoder", f"--model_dir={trained_reverse.model_dir}",
                    f"--usr_dir={USR_PROBLEMS}", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    process.stdin.write(b"1 2 3\n")
    process.stdin.flush()
    assert process.stdout.readline() == b"3 2 1\n"
    code, err = interrupt(process)
    assert_interrupted(code, err, "decoder")
    assert "restored" in err


def test_ctrl_c_during_datagen_leaves_no_partial_shards(tmp_path):
    """Started with SIGINT ignored, as a script's background job is (the suite itself may run
    so): the command still ends on SIGINT, as the trainer does while it trains. Python would
    keep ignoring it."""
    usr_dir = tmp_path / "blocked.py"
    usr_dir.write_text(BLOCKED_PROBLEM)
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    data_dir = tmp_path / "data"
    process = start("datagen", "--problem=test_blocked_reverse", f"--data_dir={data_dir}",
                    f"--usr_dir={usr_dir}", env={"T2T_TEST_FIFO": fifo}, sigint=signal.SIG_IGN)
    assert_interrupted(*interrupt(process, fifo), "datagen")
    assert not [name for name in os.listdir(data_dir) if not name.startswith(".")]


def test_a_decoder_piped_into_head_exits_quietly(trained_reverse):
    """`t2t-lite-decoder ... | head -1`: once the reader is gone, the next line written ends
    the decoder with status 141 (as SIGPIPE ends cat or grep) and without a word."""
    process = start("decoder", f"--model_dir={trained_reverse.model_dir}",
                    f"--usr_dir={USR_PROBLEMS}", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    process.stdin.write(b"1 2 3\n")
    process.stdin.flush()
    assert process.stdout.readline() == b"3 2 1\n"
    process.stdout.close()  # as head does after its line
    process.stdin.write(b"4 5\n6 7\n")
    process.stdin.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141, err
    assert [line for line in err.splitlines() if line[:8].count(":") != 2] == [], err
