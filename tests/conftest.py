"""Shared test setup: two logical CPU devices (for MirroredStrategy), the `slow` marker's rule
and small trained models. It imports neither TensorFlow nor Keras itself, so that a unit test
that needs neither (tests/test_config.py, tests/test_registry.py) runs without them."""

import contextlib
import fcntl
import json
import os
import random
import shutil
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist runs a worker per core: each worker's TensorFlow (and the trainers and
    # notebooks it starts, which inherit this) computes on one thread, not on every core.
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")

import pytest

# The fixtures that train a model (in this process or a subprocess), by the module that defines
# them: every test that uses one, directly or through another fixture, is marked `slow`.
TRAINING_FIXTURES = {
    "conftest": {"trained_reverse", "train_short_reverse", "tiny_model", "model_copy"},
    "test_distributed": {"uninterrupted"},
    "test_jax_training": {"jax_demo", "small_uninterrupted"},
    "test_parsing": {"parser"},
    "test_translate_files": {"trained"},
}


def _two_logical_cpus():
    """Splits the CPU into two logical devices for MirroredStrategy (two_cpu_strategy). Only
    possible before TensorFlow initializes its devices, i.e. before anything touches a tensor:
    the test modules that use it import TensorFlow at their top, so it is done once they are
    collected, and again (a no-op if done) where two_cpu_strategy is first used."""
    tf = sys.modules["tensorflow"]
    cpu = tf.config.list_physical_devices("CPU")[0]
    if len(tf.config.get_logical_device_configuration(cpu) or []) == 2:
        return
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    except RuntimeError:  # devices already initialized: two_cpu_strategy's tests will fail
        pass


def pytest_xdist_auto_num_workers(config):
    """`-n auto` starts one worker more than the cores this process may use (then capped by
    --maxprocesses): many tests wait on subprocesses (trainers, notebooks' kernels and
    commands, JAX jobs) or on timers, so two workers kept 2 cores only ~180% busy; a third
    fills the gaps. Measured on 2 cores, the same commit back to back, alone: 1,050.6 s with
    2 workers, 991.0 s with 3. PYTEST_XDIST_AUTO_NUM_WORKERS still decides where set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own hook reads it
    return len(os.sched_getaffinity(0)) + 1


# The test files that take the most CPU time, most first (measured 2026-11-27, the whole suite
# on 2 cores: 227, 197, 161, 151, 127, 120, 95 CPU-seconds and down). pytest-xdist's
# --dist loadfile hands each worker the next file of its queue, which it orders by the number of
# tests; these few heavy files then came last and one worker ran the final one for ~40 s while
# the others were idle. They go first, the rest after in xdist's order (see pytest_configure).
HEAVIEST_FIRST = ("test_jax_training.py", "test_parsing.py", "test_notebooks.py",
                  "test_sampling.py", "test_distributed.py", "test_faults.py",
                  "test_jax_backend.py", "test_training.py", "test_translate_files.py",
                  "test_warm_start.py", "test_decoding.py", "test_export.py")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    files = {}
    for item in items:
        files.setdefault(item.path, []).append(item)
    heavy = {name: rank for rank, name in enumerate(HEAVIEST_FIRST)}
    order = sorted(files, key=lambda path: (heavy.get(path.name, len(heavy)), -len(files[path])))
    items[:] = [item for path in order for item in files[path]]
    for item in items:
        module = getattr(item, "module", None)
        module = module.__name__ if module else ""
        if any(name in item.fixturenames for name in TRAINING_FIXTURES["conftest"]) or any(
                name in item.fixturenames for name in TRAINING_FIXTURES.get(module, ())):
            item.add_marker(pytest.mark.slow)
        # Beside tests/test_ctranslate2.py: the tests named for CTranslate2, and those whose
        # `engine` parameter is ctranslate2.
        callspec = getattr(item, "callspec", None)
        if "ctranslate2" in getattr(item, "originalname", "") or (
                callspec and callspec.params.get("engine") == "ctranslate2"):
            item.add_marker(pytest.mark.ctranslate2)


def pytest_collection_finish(session):
    if "tensorflow" in sys.modules:
        _two_logical_cpus()


@pytest.fixture(autouse=True)
def _reset_keras_seed():
    """Every test starts from the same seeds: Python's, NumPy's, and Keras's and TensorFlow's
    where a test module imported them (Keras's seed generators draw from Python's seed)."""
    if "keras" in sys.modules:
        sys.modules["keras"].utils.set_random_seed(1234)
    else:
        import numpy as np

        random.seed(1234)
        np.random.seed(1234)
        if "tensorflow" in sys.modules:
            sys.modules["tensorflow"].random.set_seed(1234)


def pytest_configure(config):
    """pytest-xdist keeps the order of files pytest_collection_modifyitems gives (instead of
    reordering them by their number of tests). The tests' JAX subprocesses (KERAS_BACKEND=jax,
    which read JAX's settings from the environment) share one persistent XLA compilation cache
    for the run: a trainer or decoder run again on the same shapes (a resumed run, the same
    model in another test) loads its programs instead of compiling them again, about half of a
    small JAX run's CPU time."""
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist's --no-loadscope-reorder
        config.option.loadscopereorder = False
    if os.environ.get("PYTEST_XDIST_WORKER") or "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return  # the workers inherit the controller's; or the user's own cache
    config.jax_cache = tempfile.mkdtemp(prefix="t2t_lite_tests_jax_cache")
    os.environ.update(JAX_COMPILATION_CACHE_DIR=config.jax_cache,
                      JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                      JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")


def pytest_unconfigure(config):
    if getattr(config, "jax_cache", None):
        shutil.rmtree(config.jax_cache, ignore_errors=True)


class TrainedModel:
    """A Runner whose model_dir holds a trained checkpoint, and its dev metrics."""

    def __init__(self, runner, metrics, step):
        self.runner = runner
        self.metrics = metrics
        self.step = step  # of the checkpoint in best/
        self.model_dir = runner.model_dir.path


@contextlib.contextmanager
def _waiting_lock(path):
    """Holds an exclusive lock on `path`, waiting for it (one xdist worker at a time)."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def shared_directory(tmp_path_factory, name, make):
    """The directory `name` that make(path) fills, made once per test run however many
    pytest-xdist workers ask for it: the first makes it while the others wait."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by the workers of one run
    path = root / name
    with _waiting_lock(root / f"{name}.lock"):
        if not (root / f"{name}.done").exists():
            shutil.rmtree(path, ignore_errors=True)
            make(str(path))
            (root / f"{name}.done").touch()
    return str(path)


def train_short_reverse(model_dir, overrides=""):
    """transformer_tiny at d_model=64 (and `overrides`), trained by the trainer CLI for 800 steps
    on reversing 1-8 symbols (problem `test_short_reverse`); about a minute on 2 cores.

    The model is the best of the evaluations every 200 steps (kept by --keep_best_by in
    model_dir/best), with its metrics from greedy decoding of the 500 dev sequences: once
    learned, Adam at this learning rate now and then spikes and unlearns for a while (seen:
    sequence accuracy 1.0 at step 800 and 0.96 at 1000; 0.93 at step 800 in one CI run). The
    run is seeded (initialization, dropout, data order), so it is the same model every time on
    one CPU: sequence accuracy 0.762, 0.996, 0.902, 1.0 at steps 200 to 800 on an Intel CPU
    (measured again 2026-11-26); on an AMD one the best of 200 to 800 was step 600. A 600-step
    run (tried for the suite's time) keeps step 400's model on that Intel CPU, whose attention
    and fine-tuning fall short of what test_attention, test_alignment and test_warm_start
    measured on the better-trained one: 800 steps serve both CPUs.
    """
    import keras

    from t2t_lite.cli import trainer

    keras.utils.set_random_seed(1234)  # session fixtures run before the per-test seeding
    trainer.main([
        "--problem=test_short_reverse", "--hparams_set=transformer_tiny",
        f"--hparams=d_model=64,d_ff=256,dropout=0.0,warmup_steps=100{overrides}",
        f"--model_dir={model_dir}", "--train_steps=800", "--eval_every=200",
        "--eval_decode_examples=500", "--keep_best_by=sequence_accuracy",
        "--random_seed=1234"])
    return trained_model(model_dir)


def trained_model(model_dir):
    """The TrainedModel of train_short_reverse's model_dir: its best/, and its metrics."""
    from t2t_lite.runner import Runner

    best = os.path.join(model_dir, "best")
    with open(os.path.join(best, "info.json"), encoding="utf-8") as f:
        step = json.load(f)["step"]
    with open(os.path.join(model_dir, "eval", "history.json"), encoding="utf-8") as f:
        (metrics,) = [entry["metrics"] for entry in json.load(f) if entry["step"] == step]
    return TrainedModel(Runner.from_model_dir(best), metrics, step)


@pytest.fixture(scope="session", name="train_short_reverse")
def _train_short_reverse():
    return train_short_reverse


@pytest.fixture(scope="session")
def short_reverse_data(tmp_path_factory):
    """A data_dir holding test_short_reverse's shards."""
    from t2t_lite.runner import Runner

    def make(path):
        Runner.create_or_resume(f"{path}.unused", "test_short_reverse", "transformer_tiny",
                                data_dir=path).prepare_data()

    return shared_directory(tmp_path_factory, "short_reverse_data", make)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, short_reverse_data):
    """A model_dir trained for 4 updates with checkpoints at steps 2 and 4 (see
    tiny_model_dir.py); tests that change it use model_copy."""
    from tiny_model_dir import train_tiny_model

    return shared_directory(tmp_path_factory, "tiny_model",
                            lambda path: train_tiny_model(path, short_reverse_data))


@pytest.fixture
def model_copy(tiny_model, tmp_path):
    path = str(tmp_path / "model")
    shutil.copytree(tiny_model, path)
    return path


@pytest.fixture(scope="session")
def two_cpu_strategy():
    """One MirroredStrategy over the two logical CPUs for every test that trains with it:
    TensorFlow gives each new MirroredStrategy the same collective keys, so a second one in the
    process whose updates all-reduce other tensors (another model, clipping's extra all-reduce)
    fails with "Shape mismatch in the collective instance"."""
    import tensorflow as tf

    _two_logical_cpus()
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


@pytest.fixture(scope="session")
def trained_reverse(tmp_path_factory):
    """The demo model in float32; test_training asserts it learned. Reuse it wherever a
    trained model is needed: it is trained once per test run."""
    return trained_model(shared_directory(tmp_path_factory, "trained_reverse",
                                          train_short_reverse))


from t2t_lite.registry import import_usr_dir

import_usr_dir(os.path.join(os.path.dirname(__file__), "usr_problems.py"))  # test_short_reverse
