"""File-system and process faults: each a one-line error (exit 2) naming the path and the fix,
and nothing a user made lost or left unreadable."""

import glob
import json
import os
import re
import stat
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from cli_output import error_lines, run_cli
from tiny_model_dir import train_flags

from t2t_lite.utils.files import temporary_directory, write_text_atomically


def environment(**extra):
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "", **extra}


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
from t2t_lite.backends.tensorflow.pipeline import serialize_example
print(hashlib.sha256(b"".join(serialize_example([i, 5], [i + 2, 7, 1]) for i in range(50)))
      .hexdigest())
"""


@pytest.mark.slow  # a process that imports TensorFlow: ~4 s
def test_examples_serialize_to_the_same_bytes_in_every_process():
    """The feature map's order varied with the process's hash seed, so two datagen runs of one
    corpus wrote shards with different checksums. This process (its own random hash seed) and
    another, seeded 1."""
    import contextlib
    import io

    here = io.StringIO()
    with contextlib.redirect_stdout(here):
        exec(SERIALIZE, {})  # noqa: S102 (the same program as the other processes)
    seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"  # not this process's
    there = subprocess.run([sys.executable, "-c", SERIALIZE], capture_output=True, text=True,
                           check=True, env=environment(PYTHONHASHSEED=seed)).stdout
    assert there == here.getvalue()


def weights(path):
    reader = tf.train.load_checkpoint(path)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith("model/")}


def test_every_file_of_a_model_dir_and_its_data_dir_damaged_every_way_resumes_or_is_one_line(
        tiny_model, short_reverse_data, tmp_path):
    """Issue 47's sweep on TensorFlow (tests/damage_sweep.py): each kind of file the tiny
    model_dir and its data_dir hold, cut, emptied, bytes flipped in place and deleted, read by
    the decoder or the trainer, resumes from the newest intact state (with a warning naming
    the damage where it falls back) or is refused in one line naming the file, nothing changed."""
    from damage_sweep import TRAINER_FLAGS, Sweep, check

    sweep = Sweep(tiny_model, short_reverse_data, str(tmp_path), TRAINER_FLAGS)
    check(list(sweep.cases()), sweep.kinds, sweep.previous)


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


def test_an_index_cut_in_place_is_named_and_the_trainer_resumes_from_what_is_intact(
        model_copy, short_reverse_data, capsys):
    """An index cut in half (damaged in place, not deleted) ended the decoder and the trainer in
    "OpError: not an sstable" (50 lines). The decoder names it and the intact checkpoint to
    pass; the trainer resumes from the newest intact one, with a warning. (The other damages in
    place, an index emptied or a .data with bytes flipped, are damage_sweep's cases.)"""
    from t2t_lite.cli import decoder, trainer

    latest = f"{model_copy}/ckpt-4"
    with open(f"{latest}.index", "r+b") as f:
        f.truncate(os.path.getsize(f"{latest}.index") // 2)
    source = os.path.join(model_copy, "source.txt")
    write_text_atomically(source, "1 2 3\n")

    code, out, err = run_cli(decoder.main, [f"--model_dir={model_copy}",
                                            f"--decode_from_file={source}"], capsys)
    assert code == 2 and out == "" and error_lines(err) == [
        f"t2t-lite: error: checkpoint {latest} is damaged (not an sstable (bad magic number); a "
        f"bad copy or sync?): pass --checkpoint_path={model_copy}/ckpt-2, the newest intact one"
    ], err

    code, out, err = run_cli(trainer.main, train_flags(model_copy, short_reverse_data, 6), capsys)
    assert code == 0 and "final evaluation at step 6:" in out, err
    assert f"checkpoint {latest} is damaged" in err and "(step 2)" in err


@pytest.mark.parametrize("damage, newest", [("index deleted", 2), ("list names ckpt-9", 4),
                                            ("list names ckpt-2 and ckpt-9", 4)])
def test_a_missing_checkpoint_is_named_and_the_newest_one_there_is_used(
        damage, newest, model_copy, short_reverse_data, capsys):
    """ckpt-4.index deleted, or the list (the `checkpoint` file) naming a ckpt-9 that is not
    there: tf.train.latest_checkpoint gives None, so the trainer started over at step 0 and the
    decoder found no checkpoint. Both use the newest one there (on disk, not only among those
    listed), with a warning naming the missing one, and the trainer's list names every
    checkpoint that is there, the older ones included (its CheckpointManager forgot those of a
    list rewritten without timestamps)."""
    from t2t_lite.cli import decoder, trainer

    if damage == "index deleted":
        missing = f"{model_copy}/ckpt-4"
        os.remove(f"{missing}.index")
    elif damage == "list names ckpt-9":
        missing = f"{model_copy}/ckpt-9"
        with open(f"{model_copy}/checkpoint", encoding="utf-8") as f:
            listed = f.read()
        write_text_atomically(f"{model_copy}/checkpoint", listed.replace(
            'model_checkpoint_path: "ckpt-4"', 'model_checkpoint_path: "ckpt-9"'))
    else:  # ckpt-4, intact on disk, is not listed
        missing = f"{model_copy}/ckpt-9"
        write_text_atomically(f"{model_copy}/checkpoint", 'model_checkpoint_path: "ckpt-9"\n'
                              'all_model_checkpoint_paths: "ckpt-2"\n'
                              'all_model_checkpoint_paths: "ckpt-9"\n')
    warning = (f"checkpoint {missing} is missing (no .index or .weights.h5 file: deleted, or a "
               f"bad copy?): using {model_copy}/ckpt-{newest}, the newest checkpoint there\n")
    source = os.path.join(model_copy, "source.txt")
    write_text_atomically(source, "1 2 3\n")

    code, out, err = run_cli(decoder.main, [f"--model_dir={model_copy}",
                                            f"--decode_from_file={source}"], capsys)
    assert code == 0 and len(out.splitlines()) == 1, err
    assert warning in err and f"restored {model_copy}/ckpt-{newest}\n" in err

    code, out, err = run_cli(trainer.main, train_flags(model_copy, short_reverse_data, 6), capsys)
    assert code == 0, err
    assert warning in err and f"restored {model_copy}/ckpt-{newest} (step {newest})" in err
    assert "final evaluation at step 6:" in out
    listed = tf.train.get_checkpoint_state(model_copy).all_model_checkpoint_paths
    assert listed == [f"{model_copy}/ckpt-{step}" for step in (2, 4, 6)]
    assert all(os.path.exists(f"{path}.index") for path in listed), listed


def test_a_file_size_limit_while_saving_is_one_line_and_leaves_no_partial_checkpoint(
        model_copy, short_reverse_data, capsys, monkeypatch):
    """Writes beyond a file-size limit fail (EFBIG) midway through the real save of ckpt-6, as
    they would on a full disk; the error names the limit, not free space, which the disk has; a
    stale ckpt-N_temp of an earlier failure is removed on the next start."""
    import resource
    import signal

    from t2t_lite.cli import trainer

    checkpoint_bytes = sum(os.path.getsize(path) for path in glob.glob(f"{model_copy}/ckpt-4.*"))
    monkeypatch.setattr(signal, "SIGXFSZ", signal.SIGXFSZ)  # restored handler below
    previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (checkpoint_bytes // 2, limits[1]))
    try:
        code, _, err = run_cli(trainer.main, train_flags(model_copy, short_reverse_data, 6),
                               capsys)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, previous_handler)
    assert code == 2, err
    (error,) = error_lines(err)
    size = float(re.search(r"File too large\): it writes files of about ([\d.]+) MiB, over a "
                           r"file-size limit there \(`ulimit -f`", error).group(1))
    assert f"cannot save the checkpoint of step 6 in {model_copy} (" in error
    assert "free" not in error and "function_node" not in error and "[Op:" not in error
    assert size == round(checkpoint_bytes / 2**20, 1)  # as big as the last one
    assert not glob.glob(f"{model_copy}/*_temp") and tf.train.latest_checkpoint(model_copy) == (
        f"{model_copy}/ckpt-4")

    os.makedirs(f"{model_copy}/ckpt-9_temp")  # as if the process had been killed mid-save
    open(f"{model_copy}/ckpt-9_temp/part-00000-of-00001.data-00000-of-00001", "wb").close()
    code, _, err = run_cli(trainer.main, train_flags(model_copy, short_reverse_data, 6), capsys)
    assert code == 0, err
    assert not glob.glob(f"{model_copy}/*_temp") and tf.train.latest_checkpoint(model_copy) == (
        f"{model_copy}/ckpt-6")


def test_a_file_size_limit_while_averaging_is_one_line_and_leaves_nothing(
        model_copy, tmp_path, capsys, monkeypatch):
    """The saves of best/ and of an average (t2t-lite-avg-checkpoints, --average_last) ended in
    a 58-66 line ResourceExhaustedError on a full disk: one line naming the cause, and no
    output or temporary left."""
    import resource
    import signal

    from t2t_lite.cli import avg_checkpoints

    monkeypatch.setattr(signal, "SIGXFSZ", signal.SIGXFSZ)  # restored handler below
    previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    # Below the average's weights and Adam moments (no data position: smaller than ckpt-4).
    resource.setrlimit(resource.RLIMIT_FSIZE, (16_384, limits[1]))
    try:
        code, _, err = run_cli(avg_checkpoints.main, [
            f"--model_dir={model_copy}", "--n=2", f"--output_dir={tmp_path}/averaged"], capsys)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, previous_handler)
    assert code == 2, err
    (error,) = error_lines(err)
    assert error.startswith(f"t2t-lite: error: cannot save the checkpoint of step 4 in "
                            f"{tmp_path} ("), error
    assert "File too large): it writes files of about " in error and "[Op:" not in error
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]  # temporaries
    assert not os.path.exists(f"{tmp_path}/averaged") or not os.listdir(f"{tmp_path}/averaged")


def test_a_save_refused_for_another_cause_names_it_not_free_space(model_copy,
                                                                   short_reverse_data, capsys):
    """A regular file where the save makes its ckpt-6_temp directory: exit 2 and one line that
    says "Not a directory" and how to go on, where every failure used to ask for free space."""
    from t2t_lite.cli import trainer

    open(f"{model_copy}/ckpt-6_temp", "w").close()
    code, _, err = run_cli(trainer.main, train_flags(model_copy, short_reverse_data, 6), capsys)
    assert code == 2, err
    (error,) = error_lines(err)
    assert f"error: cannot save the checkpoint of step 6 in {model_copy} (" in error
    assert error.endswith("; Not a directory): fix that and run the same command again"), error
    assert "free" not in error and "space" not in error
    assert tf.train.latest_checkpoint(model_copy) == f"{model_copy}/ckpt-4"


def test_save_failures_name_their_cause(tmp_path):
    """Real refusals (a directory under a regular file; a read-only directory, which root may
    write, so only for other users), and a full disk's errno and TensorFlow's text of it."""
    import errno

    from t2t_lite.backends.tensorflow.checkpoints import save, save_failure
    from t2t_lite.utils.errors import UserError

    checkpoint = tf.train.Checkpoint(v=tf.Variable(np.zeros(1000, "float32")))
    (tmp_path / "file").write_text("")
    refusals = {str(tmp_path / "file" / "model"): "is not a directory): fix that"}
    if os.geteuid() != 0:
        os.makedirs(tmp_path / "read-only", mode=0o555)
        refusals[str(tmp_path / "read-only")] = "Permission denied): make it writable"
    for directory, cause in refusals.items():
        manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=1)
        with pytest.raises(UserError) as raised:
            save(manager, 6, 5 * 2**20)
        message = str(raised.value)
        assert message.startswith(f"cannot save the checkpoint of step 6 in {directory} (")
        assert cause in message and "free" not in message and "\n" not in message, message
    space = "it needs 5.0 MiB free there; free some space"
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "ckpt-6.index"))
    assert f"ckpt-6.index: No space left on device): {space}" in save_failure(
        full, 6, str(tmp_path), 5 * 2**20)
    tf_full = tf.errors.ResourceExhaustedError(None, None, "{{function_node x}} ckpt-6_temp/"
                                               "part-0; No space left on device [Op:SaveV2]")
    assert save_failure(tf_full, 6, "d", 5 * 2**20) == (
        f"cannot save the checkpoint of step 6 in d (ckpt-6_temp/part-0; No space left on "
        f"device): {space} and run the same command again")


def test_training_only_hparams_may_change_on_resume(model_copy, short_reverse_data, capsys):
    """A diverged run can take the advice to lower the learning rate: the change is logged,
    recorded in hparams.json with its step and applied; shape-changing hparams are refused."""
    from t2t_lite.cli import trainer
    from t2t_lite.runner import Runner
    from t2t_lite.training.optimizer import TransformerSchedule

    code, out, err = run_cli(trainer.main, train_flags(
        model_copy, short_reverse_data, 2, "--hparams=learning_rate=0.25,dropout=0.0"), capsys)
    assert code == 0, err
    assert "from step 4 on, dropout 0.1 -> 0.0, learning_rate 0.5 -> 0.25" in err
    assert "final evaluation at step 4:" in out  # the step reached, not --train_steps=2
    with open(f"{model_copy}/hparams.json", encoding="utf-8") as f:
        saved = json.load(f)
    assert (saved["learning_rate"], saved["dropout"]) == (0.25, 0.0)
    assert saved["changed_on_resume"] == [
        {"step": 4, "dropout": [0.1, 0.0], "learning_rate": [0.5, 0.25]}]
    runner = Runner.from_model_dir(model_copy)
    trainer_ = runner.trainer()
    assert trainer_.learning_rate() == pytest.approx(float(TransformerSchedule(32, 10, 0.25)(4)))

    code, _, err = run_cli(trainer.main, train_flags(
        model_copy, short_reverse_data, 2, "--hparams=learning_rate=0.25,d_ff=128"), capsys)
    assert code == 2 and "trained with other values of d_ff" in err and "learning_rate" in err


def test_precision_may_change_on_resume_keeping_the_optimizer_state(
        model_copy, short_reverse_data, capsys):
    """float32 -> mixed_float16 -> float32: the loss-scaled optimizer wraps Adam, so the
    checkpoints nest Adam differently; the weights, Adam's moments and the step carry over both
    ways (a fresh loss scale), and training goes on."""
    import keras

    from t2t_lite.cli import trainer
    from t2t_lite.runner import Runner

    def adam(trainer_):
        optimizer = trainer_.optimizer
        if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            optimizer = optimizer.inner_optimizer
        return [v.numpy() for v in optimizer.variables]  # iterations, then Adam's moments

    def assert_same_state(expected, actual):
        assert actual.step == expected.step
        for want, got in zip(expected.model.get_weights(), actual.model.get_weights()):
            np.testing.assert_array_equal(want, got)
        want, got = adam(expected), adam(actual)
        assert len(want) == len(got) and np.any(want[-1])
        for want_variable, got_variable in zip(want, got):
            np.testing.assert_array_equal(want_variable, got_variable)

    steps = 4
    for precision in ("mixed_float16", "float32"):
        before = Runner.from_model_dir(model_copy).trainer()
        resumed = Runner.create_or_resume(model_copy, overrides=f"precision={precision}")
        after = resumed.trainer()
        assert after.model.compute_dtype == precision.replace("mixed_", "")
        assert_same_state(before, after)
        code, _, err = run_cli(trainer.main, train_flags(
            model_copy, short_reverse_data, steps + 2, f"--hparams=precision={precision}"), capsys)
        assert code == 0, err
        assert Runner.from_model_dir(model_copy).trainer().step == steps + 2
        steps += 2
    with open(f"{model_copy}/hparams.json", encoding="utf-8") as f:
        saved = json.load(f)
    assert saved["precision"] == "float32" and saved["changed_on_resume"] == [
        {"step": 4, "precision": ["float32", "mixed_float16"]},
        {"step": 6, "precision": ["mixed_float16", "float32"]}]


@pytest.mark.parametrize("flag", ["model_dir", "data_dir"])
def test_a_file_where_a_directory_is_expected_is_one_line(flag, tmp_path, capsys):
    from t2t_lite.cli import trainer

    (tmp_path / "file").write_text("")
    dirs = {"model_dir": str(tmp_path / "model"), "data_dir": str(tmp_path / "data"),
            flag: str(tmp_path / "file")}
    code, _, err = run_cli(trainer.main, [
        "--problem=test_short_reverse", "--hparams_set=transformer_tiny",
        *(f"--{name}={path}" for name, path in dirs.items())], capsys)
    assert code == 2
    assert f"error: --{flag} {tmp_path / 'file'} is a file, not a directory: pass a directory\n" \
        == err[err.index("error:"):]


@pytest.mark.parametrize("path, message", [
    ("FILE/new", "--FLAG FILE/new cannot be created (Not a directory)"),
    ("FILE", "--FLAG FILE is a file, not a directory"),
    ("/proc/t2t_lite", "--FLAG /proc/t2t_lite cannot be created (No such file or directory)"),
])
def test_output_paths_are_checked_before_any_work(path, message, tiny_model, tmp_path, capsys):
    """t2t-lite-avg-checkpoints checks --output_dir before averaging, not after."""
    from t2t_lite.cli import avg_checkpoints, exporter

    (tmp_path / "FILE").write_text("")
    path = path.replace("FILE", str(tmp_path / "FILE"))
    message = message.replace("FILE", str(tmp_path / "FILE"))
    for main, flag in ((avg_checkpoints.main, "output_dir"), (exporter.main, "export_dir")):
        code, _, err = run_cli(main, [f"--model_dir={tiny_model}", f"--{flag}={path}", "--n=2"]
                               [: 3 if flag == "output_dir" else 2], capsys)
        assert code == 2 and message.replace("FLAG", flag) in err and "averaged" not in err, err


def test_a_usr_dir_with_a_syntax_error_names_its_file_and_line(tmp_path, capsys):
    from t2t_lite.cli import trainer

    (tmp_path / "broken.py").write_text("import os\n\ndef f(:\n    pass\n")
    code, _, err = run_cli(trainer.main, [f"--usr_dir={tmp_path / 'broken.py'}",
                                          "--registry_help"], capsys)
    assert code == 2
    assert err == (f"t2t-lite: error: --usr_dir {tmp_path / 'broken.py'} line 3: invalid "
                   "syntax: fix the syntax error there\n")


def test_a_usr_dir_named_like_a_module_in_use_is_one_line(tmp_path, capsys):
    """A json.py was silently not loaded (Python's json was returned for it), and the error
    then said its problem was unknown."""
    import json as stdlib_json

    from t2t_lite.cli import trainer

    (tmp_path / "json.py").write_text("raise RuntimeError('the user module ran')\n")
    code, _, err = run_cli(trainer.main, [f"--usr_dir={tmp_path / 'json.py'}",
                                          "--registry_help"], capsys)
    assert code == 2 and err == (
        f"t2t-lite: error: --usr_dir {tmp_path / 'json.py'}: the module name 'json' is taken by "
        f"{stdlib_json.__file__}, which t2t_lite imports: rename yours (e.g. my_json)\n")


@pytest.mark.parametrize("files, where, message", [
    ({"usr.py": "import os\nimport t2t_lite_no_such_module\n"}, "usr.py line 2",
     ("ModuleNotFoundError: No module named 't2t_lite_no_such_module': fix the import there, "
      "or install the module it names")),
    ({"usr/__init__.py": "from usr import problems\n",
      "usr/problems.py": ("SIZES = {}\n\ndef size(name):\n    return SIZES[name]\n\n"
                          "BIG = size('big')\n")},
     "usr/problems.py line 4", "KeyError: 'big': fix the error there"),
])
def test_a_usr_dir_that_fails_as_it_runs_names_its_file_and_line(files, where, message,
                                                                  tmp_path, capsys):
    """Not only a syntax error: any exception the user's module raises while it is imported
    is one line naming the innermost line of the user's code it passed through."""
    from t2t_lite.cli import trainer

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    usr_dir = tmp_path / next(iter(files)).replace("/__init__.py", "")
    code, _, err = run_cli(trainer.main, [f"--usr_dir={usr_dir}", "--registry_help"], capsys)
    assert code == 2
    assert err == f"t2t-lite: error: --usr_dir {tmp_path / where}: {message}\n"
    assert "usr" not in sys.modules and "usr.problems" not in sys.modules


def test_a_too_small_vocabulary_size_names_the_smallest_that_works(tmp_path):
    from t2t_lite.data.vocabulary import SentencePieceVocabulary
    from t2t_lite.utils.errors import UserError

    lines = ["über Straße Öl café naïve 東京 the house is small grün schnell"] * 50
    with pytest.raises(UserError, match="choose a vocabulary size of at least") as error:
        SentencePieceVocabulary.train(str(tmp_path / "v"), lines, 200)
    smallest = int(str(error.value).rsplit(" ", 1)[1])
    assert SentencePieceVocabulary.train(str(tmp_path / "v"), lines, smallest).size == smallest
    with pytest.raises(UserError, match=f"at least {smallest}"):
        SentencePieceVocabulary.train(str(tmp_path / "v"), lines, smallest - 1)


@pytest.mark.parametrize("config, problem", [
    ('{"cluster": {"worker": ["h1:2222"]}, "task": ',
     "is not JSON (Expecting value: line 1 column 46 (char 45))"),
    ('["h1:2222", "h2:2222"]',
     'has no "cluster" object of jobs, e.g. {"worker": ["10.0.0.1:2222", ...]}'),
    ('{"cluster": {"worker": ["h1"]}, "task": {"type": "worker", "index": 0}}',
     "job 'worker' lists \"h1\", not host:port"),
    ('{"cluster": {"worker": ["h1:2222"]}, "task": {"type": "chief", "index": 0}}',
     'has no "task" of a job in its cluster (worker), e.g. {"type": "worker", "index": 0}'),
    ('{"cluster": {"worker": ["h1:2222", "h2:2222"]}, "task": {"type": "worker", "index": 2}}',
     "task index 2 is not in [0, 1]: job 'worker' has 2 addresses"),
])
def test_a_malformed_tf_config_is_named(config, problem, tmp_path, capsys, monkeypatch):
    from t2t_lite.cli import trainer

    monkeypatch.setenv("TF_CONFIG", config)
    code, _, err = run_cli(trainer.main, [
        "--problem=test_short_reverse", "--hparams_set=transformer_tiny",
        f"--model_dir={tmp_path / 'model'}"], capsys)
    assert code == 2
    assert err == (f"t2t-lite: error: TF_CONFIG {problem}: set it to this worker's line of "
                   "`t2t-lite-make-tf-configs --workers=HOST:PORT,...`, or unset it to train "
                   "on this machine alone\n")
    assert not (tmp_path / "model").exists()


def test_a_time_budget_stops_with_a_checkpoint_then_evaluates_averages_and_resumes(
        model_copy, short_reverse_data, capsys):
    """--train_minutes stops a run that --train_steps would not end, after an update with a
    checkpoint; the final evaluation and --average_last still run (an outside `timeout` skips
    them); the same command goes on from there. A budget that is not a positive number is one
    line."""
    from t2t_lite.cli import trainer
    from t2t_lite.training.checkpoint_list import checkpoint_paths, latest_step

    flags = train_flags(model_copy, short_reverse_data, 1_000_000, "--train_minutes=0.05",
                        "--average_last=2")
    code, out, err = run_cli(trainer.main, flags, capsys)
    assert code == 0, err
    first = latest_step(model_copy)
    assert 4 < first < 1_000_000 and f"final evaluation at step {first}:" in out
    assert f"the time budget (--train_minutes) is spent: training stops at step {first}" in err
    # The rate cools down to 0 at the deadline, where the last update starts (training/budget.py).
    assert ("time budget 0.05 min: the learning rate falls linearly to 0 over its last 0.01 min"
            in err)
    assert re.search(rf"step {first}/1000000  loss \S+  accuracy \S+  lr 0  ", err), err
    assert "avg/, the average of the last 2 (steps" in err
    # Where the time went (training/time_account.py): the updates after the first are counted
    # one by one, and only the parts the run had are named (a loaded machine whose first update
    # outlasts the budget makes no other, and the line then has no "updates" part).
    spent = re.search(r"the run's \S+: first update \S+ \(\d+%\), (?:updates \S+ \(\d+%, "
                      r"([\d,]+) of them\), )?(.*)", err)
    start = int(re.search(r"restored \S+ \(step (\d+)\)", err)[1])  # the fixture's copy
    assert spent, err
    assert int((spent[1] or "0").replace(",", "")) == first - start - 1, err
    assert re.match(r"(evaluations \S+ \(\d+%, \d+\), )?checkpoints \S+ \(\d+%, \d+\), final "
                    r"evaluation \S+ \(\d+%\), averaging \S+ \(\d+%\), the rest", spent[2])
    with open(os.path.join(model_copy, "eval", "history.json"), encoding="utf-8") as f:
        assert json.load(f)[-1]["step"] == first
    averaged = json.load(open(os.path.join(model_copy, "avg", "info.json"), encoding="utf-8"))
    assert averaged["metrics"]["loss"] > 0 and f"ckpt-{first}" in json.dumps(averaged)

    code, out, err = run_cli(trainer.main, flags, capsys)
    assert code == 0, err
    assert f"(step {first})" in err and latest_step(model_copy) > first
    assert checkpoint_paths(model_copy)[-1].endswith(f"ckpt-{latest_step(model_copy)}")

    for budget in ("0", "-1", "nan"):
        code, _, err = run_cli(trainer.main, train_flags(
            model_copy, short_reverse_data, 10, f"--train_minutes={budget}"), capsys)
        errors = error_lines(err)
        assert code == 2 and len(errors) == 1, err
        assert "--train_minutes must be a positive number" in errors[0]
