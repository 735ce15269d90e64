"""Training on JAX across processes (jax.distributed over gloo between local processes, each with
two virtual CPU devices, as across hosts): the same updates as one process over all the devices,
one writer, the same stop on every process, resuming, and one-line errors for a cluster that
cannot be formed."""

import os
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from cli_output import error_lines, run_cli
from jax_subprocess import jax_environment
from tiny_model_dir import OVERRIDES

from t2t_lite.training.checkpoint_list import latest_step

pytestmark = [pytest.mark.jax, pytest.mark.distributed]

TESTS = os.path.dirname(__file__)
USR_PROBLEMS = os.path.join(TESTS, "usr_problems.py")
TRAINER = "from t2t_lite.cli.trainer import run; run()"  # as t2t-lite-trainer


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hosts_environment(devices, **more):
    """A JAX process without GPUs, with `devices` virtual CPU devices."""
    return jax_environment(devices, fast_compile=True, CUDA_VISIBLE_DEVICES="",
                           PYTHONPATH=os.pathsep.join([os.path.dirname(TESTS),
                                                       os.environ.get("PYTHONPATH", "")]),
                           **more)


def wait_all(processes, timeout):
    """Waits for every process; kills them all (and fails) past `timeout`: a cluster that
    hangs fails the test instead of hanging it."""
    deadline = time.monotonic() + timeout
    try:
        for process in processes:
            process.wait(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pytest.fail(f"the processes did not end within {timeout} s")
    finally:
        for process in processes:
            process.kill()


def run_job(out_dir, processes, devices):
    """tests/jax_hosts_job.py in `processes` processes of `devices` devices each."""
    os.makedirs(out_dir)
    port = free_port()
    logs = [open(os.path.join(out_dir, f"log-{i}"), "w") for i in range(processes)]
    started = [subprocess.Popen(
        [sys.executable, os.path.join(TESTS, "jax_hosts_job.py"), str(i), str(processes),
         str(port), out_dir], stdout=log, stderr=subprocess.STDOUT,
        env=hosts_environment(devices)) for i, log in enumerate(logs)]
    wait_all(started, 400)
    for process, log in zip(started, logs):
        log.close()
        with open(log.name) as f:
            assert process.returncode == 0, f.read()[-3000:]
    return [dict(np.load(os.path.join(out_dir, f"process-{i}.npz"))) for i in range(processes)]


@pytest.mark.slow  # three JAX processes: ~100 s on 2 cores
def test_two_processes_of_two_devices_update_as_one_process_of_four(tmp_path):
    """The same global batches (each process feeding its devices' rows, assembled by
    jax.make_array_from_process_local_data), the same initialization and dropout seeds: three
    updates give the same losses and weights on 2 processes x 2 devices as on 1 x 4, and the
    same on both processes; a checkpoint written by process 0 alone, restored by both, makes
    the third update again exactly."""
    (one,) = run_job(str(tmp_path / "one"), processes=1, devices=4)
    two = run_job(str(tmp_path / "two"), processes=2, devices=2)
    assert one["rows"] == 2 * two[0]["rows"] == 2 * two[1]["rows"]  # each process half the rows
    assert one["losses"][2] < one["losses"][0]  # the updates learn
    weights = sorted(k for k in one if k.startswith("weight_"))
    assert len(weights) > 10
    for result in two:
        np.testing.assert_allclose(result["losses"], one["losses"], rtol=1e-5)
        for name in weights:
            np.testing.assert_allclose(result[name], one[name], rtol=1e-5, atol=1e-6,
                                       err_msg=name)
    for result in (one, *two):
        assert result["steps"] == 3
        np.testing.assert_allclose(result["restored_loss"], result["losses"][2], rtol=1e-6)
        for name in weights:
            np.testing.assert_allclose(result[name.replace("weight_", "restored_")],
                                       result[name], rtol=1e-6, atol=1e-7, err_msg=name)


def trainer_processes(tmp_path, run, flags, temporary_dirs):
    """The trainer command in two processes of two devices; each logs to tmp_path/run-i.log."""
    port = free_port()
    logs = [tmp_path / f"{run}-{i}.log" for i in range(2)]
    processes = []
    for i, log in enumerate(logs):
        with open(log, "w") as stderr:
            processes.append(subprocess.Popen(
                [sys.executable, "-c", TRAINER, *flags, f"--coordinator_address=127.0.0.1:{port}",
                 "--num_processes=2", f"--process_id={i}"], stdout=stderr, stderr=subprocess.STDOUT,
                env=hosts_environment(2, TMPDIR=str(temporary_dirs[i]))))
    return processes, logs


@pytest.mark.slow  # four JAX trainer processes: ~2-3 min on 2 cores
def test_a_sigterm_to_one_process_stops_both_with_one_checkpoint_and_both_resume(tmp_path):
    """Two trainer processes on a data_dir without data (three training shards: uneven
    shares): process 0 generates it, trains with process 1, and alone writes into model_dir
    (process 1's checkpoints go to its own temporary directory, removed at exit). SIGTERM to
    process 1 stops both after the same update, process 0 having saved that step; the same
    command resumes both from it to the end, with the same final evaluation on both. Process 1
    exits only after process 0's checkpoint is whole (the barrier after every save)."""
    model_dir, data_dir = tmp_path / "model", tmp_path / "data"
    temporary = [tmp_path / "tmp0", tmp_path / "tmp1"]
    for path in temporary:
        path.mkdir()
    flags = [f"--usr_dir={USR_PROBLEMS}", "--problem=test_uneven_reverse",
             "--hparams_set=transformer_tiny", f"--hparams={OVERRIDES}",
             f"--model_dir={model_dir}", f"--data_dir={data_dir}", "--save_every=5",
             "--eval_every=0", "--eval_steps=2", "--eval_decode_examples=20", "--log_every=5",
             "--random_seed=3"]
    processes, logs = trainer_processes(tmp_path, "first", [*flags, "--train_steps=100000"],
                                        temporary)
    deadline = time.monotonic() + 300
    while not latest_step(str(model_dir)):
        if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
            for process in processes:
                process.kill()
            pytest.fail(logs[0].read_text()[-3000:] + logs[1].read_text()[-3000:])
        time.sleep(0.1)
    processes[1].send_signal(signal.SIGTERM)
    wait_all(processes[1:], 300)
    step = latest_step(str(model_dir))  # process 1 left only once process 0's save was whole
    wait_all(processes, 300)
    texts = [log.read_text() for log in logs]
    for process, text in zip(processes, texts):
        assert process.returncode == 2, text[-3000:]
    assert latest_step(str(model_dir)) == step
    assert step >= 5
    assert error_lines(texts[0])[-1].endswith(
        f"error: stopped by a signal to another worker at step {step}; saved "
        f"{model_dir}/ckpt-{step}: run the same command to resume")
    assert re.search(rf"error: stopped by SIGTERM at step {step}; saved {temporary[1]}\S*/"
                     rf"ckpt-{step}: ", error_lines(texts[1])[-1])
    assert "generating data for test_uneven_reverse" in texts[0]
    assert "generating data" not in texts[1]
    assert "process 1 of 2 of a JAX cluster: 2 devices here, 4 in all" in texts[1]
    assert list(temporary[1].iterdir()) == []  # process 1's checkpoints went with it
    written = sorted(p.name for p in model_dir.iterdir() if p.name.startswith("ckpt-"))
    assert written == sorted(f"ckpt-{s}{suffix}" for s in {*range(5, step + 1, 5), step}
                             for suffix in (".state.npz", ".weights.h5"))

    processes, logs = trainer_processes(tmp_path, "resumed",
                                        [*flags, f"--train_steps={step + 5}"], temporary)
    wait_all(processes, 300)
    texts = [log.read_text() for log in logs]
    finals = []
    for process, text in zip(processes, texts):
        assert process.returncode == 0, text[-3000:]
        assert f"restored {model_dir}/ckpt-{step} (step {step})" in text
        finals.append(re.search(r"^final evaluation at step (\d+): (.*)$", text, re.M).groups())
    assert finals[0] == finals[1] and finals[0][0] == str(step + 5)
    assert latest_step(str(model_dir)) == step + 5


def test_cluster_flags_on_tensorflow_are_one_line(tmp_path, capsys):
    """jax.distributed's flags on the TensorFlow backend name TF_CONFIG, before any work."""
    from t2t_lite.cli import trainer

    code, _, stderr = run_cli(trainer.main, [
        "--problem=algorithmic_reverse", f"--model_dir={tmp_path / 'model'}",
        "--num_processes=2"], capsys)
    assert code == 2
    (line,) = error_lines(stderr)
    assert line.endswith("error: --num_processes starts jax.distributed: on TensorFlow, "
                         "several machines read TF_CONFIG (see t2t-lite-make-tf-configs)")
    assert not (tmp_path / "model").exists()


@pytest.mark.slow  # a JAX process: ~10 s
def test_a_cluster_that_is_not_named_is_one_line_and_exit_2(tmp_path):
    """--strategy=multi_worker where nothing names the cluster (no flags, no
    KERAS_DISTRIBUTION_*, neither Cloud TPU nor Slurm) is one line naming the flags, exit 2."""
    result = subprocess.run(
        [sys.executable, "-c", TRAINER,
         "--problem=algorithmic_reverse", f"--model_dir={tmp_path / 'model'}",
         "--strategy=multi_worker"], capture_output=True, text=True, timeout=300,
        env=hosts_environment(2))
    assert result.returncode == 2, result.stderr[-3000:]
    (line,) = error_lines(result.stderr)
    assert "could not join the JAX cluster" in line and "--coordinator_address" in line
