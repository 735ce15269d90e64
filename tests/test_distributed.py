"""Training in separate processes: two workers of MultiWorkerMirroredStrategy over real gRPC on
127.0.0.1, a trainer killed with SIGKILL and started again, a second trainer on a busy model_dir."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import cli
from t2t_lite.cli import make_tf_configs, trainer
from t2t_lite.runner import Runner

USR_PROBLEMS = os.path.join(os.path.dirname(__file__), "usr_problems.py")
OVERRIDES = "d_model=32,d_ff=64,num_heads=4,batch_size=256,warmup_steps=10,learning_rate=0.5"


def environment():
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


WORKER = """
import json, logging, sys
import numpy as np
from t2t_lite.registry import import_usr_dir
from t2t_lite.runner import Runner
from t2t_lite.training import create_strategy

logging.basicConfig(stream=sys.stdout, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
logging.getLogger("t2t_lite").setLevel(logging.INFO)
usr_problems, model_dir, data_dir, overrides, output = sys.argv[1:]
import_usr_dir(usr_problems)
strategy = create_strategy("auto")  # multi_worker, from TF_CONFIG
runner = Runner.create_or_resume(model_dir, "test_short_reverse", "transformer_tiny", overrides,
                                 data_dir)
trainer = runner.trainer(strategy)
metrics = runner.train(30, trainer=trainer, seed=5, eval_every=0, save_every=10, eval_steps=2,
                       decode_examples=0, log_every=5)
np.savez(output, *trainer.model.get_weights())
print(json.dumps({"replicas": strategy.num_replicas_in_sync, "metrics": metrics}))
"""


def progress_losses(stdout):
    return [float(m) for m in re.findall(r"^\S+ step \d+/\d+  loss (\S+)", stdout, re.M)]


def test_two_workers_on_localhost_train_one_model(tmp_path, short_reverse_data):
    """Real TF_CONFIG (from t2t-lite-make-tf-configs), real gRPC: both workers finish with
    identical weights, the loss falls, and only the chief wrote into the model_dir."""
    model_dir = str(tmp_path / "model")
    addresses = [f"127.0.0.1:{port}" for port in free_ports(2)]
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, USR_PROBLEMS, model_dir, short_reverse_data, OVERRIDES,
             str(tmp_path / f"weights_{i}.npz")],
            env={**environment(), "TF_CONFIG": config}, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        for i, config in enumerate(make_tf_configs.tf_configs(addresses))]
    outputs = [worker.communicate(timeout=600) for worker in workers]
    for worker, (stdout, stderr) in zip(workers, outputs):
        assert worker.returncode == 0, stderr[-3000:] + stdout[-2000:]
    results = [json.loads(stdout.splitlines()[-1]) for stdout, _ in outputs]
    assert [r["replicas"] for r in results] == [2, 2]

    chief, other = (np.load(tmp_path / f"weights_{i}.npz") for i in range(2))
    assert len(chief.files) == len(other.files) > 10
    for name in chief.files:
        np.testing.assert_array_equal(chief[name], other[name])
    assert results[0]["metrics"]["loss"] == results[1]["metrics"]["loss"]
    for stdout, _ in outputs:  # each worker logs the loss of the global batch
        losses = progress_losses(stdout)
        assert len(losses) == 6 and losses[-1] < 0.9 * losses[0], stdout

    assert sorted(p for p in os.listdir(model_dir) if p.startswith("ckpt-30")) == [
        "ckpt-30.data-00000-of-00001", "ckpt-30.index"]
    assert len(os.listdir(os.path.join(model_dir, "train"))) == 1  # the chief's event file
    restored = Runner.from_model_dir(model_dir).trainer()
    assert restored.step == 30
    for variable, name in zip(restored.model.get_weights(), chief.files):
        np.testing.assert_array_equal(variable, chief[name])


TRAINER = ["-c", "from t2t_lite.cli.trainer import run; run()", f"--usr_dir={USR_PROBLEMS}",
           "--problem=test_short_reverse", "--hparams_set=transformer_tiny",
           f"--hparams={OVERRIDES},dropout=0.1", "--train_steps=150", "--save_every=10",
           "--eval_every=0", "--eval_steps=1", "--eval_decode_examples=0", "--log_every=10",
           "--random_seed=3"]


def model_weights(model_dir):
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith("model/")}


def test_a_killed_trainer_resumes_to_the_uninterrupted_result(tmp_path, short_reverse_data,
                                                              capsys):
    """SIGKILL mid-run, then the same command again: same final step and, since the data
    position and dropout seeds are in the checkpoint, the same weights as a run never killed.
    While it runs, a second trainer on the same model_dir is refused."""
    flags = [f"--data_dir={short_reverse_data}"]
    uninterrupted = str(tmp_path / "uninterrupted")
    subprocess.run([sys.executable, *TRAINER, *flags, f"--model_dir={uninterrupted}"],
                   env=environment(), check=True, capture_output=True, timeout=600)

    killed = str(tmp_path / "killed")
    process = subprocess.Popen([sys.executable, *TRAINER, *flags, f"--model_dir={killed}"],
                               env=environment(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not tf.train.latest_checkpoint(killed) and time.time() < deadline:
        time.sleep(0.05)
    with pytest.raises(SystemExit) as exit_info:
        cli.run(trainer.main, [f"--model_dir={killed}", *flags])
    assert exit_info.value.code == 2
    assert f"{killed} is in use by process {process.pid}" in capsys.readouterr().err
    assert process.poll() is None, "the trainer finished before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    killed_at = Runner.from_model_dir(killed).trainer().step
    assert 10 <= killed_at < 150
    for path in tf.train.get_checkpoint_state(killed).all_model_checkpoint_paths:
        tf.train.load_checkpoint(path)  # every checkpoint left behind is whole

    resumed = subprocess.run([sys.executable, *TRAINER, *flags, f"--model_dir={killed}"],
                             env=environment(), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"(step {killed_at})" in resumed.stdout
    assert re.search(r"step 150/150 ", resumed.stdout)
    assert Runner.from_model_dir(killed).trainer().step == 150
    expected, actual = model_weights(uninterrupted), model_weights(killed)
    assert expected.keys() == actual.keys()
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)


def test_tf_configs_name_every_worker_once():
    configs = [json.loads(c) for c in make_tf_configs.tf_configs(["a:1", "b:2", "c:3"])]
    assert [c["task"] for c in configs] == [{"type": "worker", "index": i} for i in range(3)]
    assert all(c["cluster"] == {"worker": ["a:1", "b:2", "c:3"]} for c in configs)


@pytest.mark.parametrize("workers, message", [
    ("a:1,b", "'b' is not host:port"), ("a:1,a:1", "names an address twice"),
    ("a:99999", "'a:99999' is not host:port")])
def test_bad_worker_lists_are_one_line(workers, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.run(make_tf_configs.main, [f"--workers={workers}"])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
