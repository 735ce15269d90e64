"""What a model_dir records (hparams.json, problem.json, eval/history.json) and when: every
value checked as --hparams are, a damaged record named in one line, recorded only once training
starts under the model_dir's lock, so that a refused or failed run changes nothing; the
decoder's search flags checked against the same ranges."""

import json
import os
import pathlib
import shutil

import pytest
import tensorflow as tf
from cli_output import error_lines, run_cli
from tiny_model_dir import OVERRIDES, train_flags

from t2t_lite.utils.files import write_text_atomically


def test_a_second_trainer_is_refused_before_it_writes_anything(
        model_copy, short_reverse_data, capsys):
    """The lock was taken only when training began, after the second trainer had recorded its
    --hparams in the running trainer's hparams.json."""
    from t2t_lite.cli import trainer
    from t2t_lite.model_dir import ModelDir
    from t2t_lite.utils.files import exclusive_lock

    def records():
        return {name: pathlib.Path(model_copy, name).read_bytes()
                for name in ("hparams.json", "problem.json", "checkpoint")}

    before = records()
    with exclusive_lock(ModelDir(model_copy).trainer_lock(), "the running trainer"):
        code, out, err = run_cli(trainer.main, train_flags(
            model_copy, short_reverse_data, 6, "--hparams=learning_rate=0.25"), capsys)
    assert code == 2 and out == "", err
    (error,) = error_lines(err)
    assert f"error: {model_copy} is in use by process {os.getpid()} on " in error
    assert "learning_rate" not in err  # no change was logged, let alone recorded
    assert records() == before


def test_an_experiment_is_recorded_once_training_starts(
        tiny_model, short_reverse_data, tmp_path, capsys):
    """A first run that failed before training (here on a --data_dir that is a file) recorded
    its hparams, and the corrected command with other --hparams was refused as "trained with
    other values". Nothing is recorded before training starts, and a model_dir without a
    checkpoint (a run killed before its first) takes the corrected flags."""
    from t2t_lite.cli import trainer

    model_dir = str(tmp_path / "model")
    (tmp_path / "file").write_text("")
    new = ["--problem=test_short_reverse", "--hparams_set=transformer_tiny"]
    code, out, err = run_cli(trainer.main, new + train_flags(
        model_dir, tmp_path / "file", 2, f"--hparams={OVERRIDES},d_model=64"), capsys)
    assert code == 2 and out == "", err
    (error,) = error_lines(err)
    assert f"error: --data_dir {tmp_path / 'file'} is a file, not a directory" in error
    assert not os.path.exists(f"{model_dir}/hparams.json")

    for name in ("hparams.json", "problem.json"):  # as if a run was killed before saving
        shutil.copy(f"{tiny_model}/{name}", model_dir)
    code, out, err = run_cli(trainer.main, new + train_flags(
        model_dir, short_reverse_data, 2, f"--hparams={OVERRIDES},d_model=16"), capsys)
    assert code == 0 and "final evaluation at step 2:" in out, err
    with open(f"{model_dir}/hparams.json", encoding="utf-8") as f:
        recorded = json.load(f)
    assert recorded["d_model"] == 16 and "changed_on_resume" not in recorded


@pytest.mark.parametrize("hparams", ["learning_rate=-1", "alpha=nan", "adam_beta2=1.5"])
def test_hparams_out_of_range_are_refused_before_anything_is_written(
        hparams, short_reverse_data, tmp_path, capsys):
    """--hparams=learning_rate=-1 trained (the loss rising from 4.6 to 13)."""
    from t2t_lite.cli import trainer

    model_dir = str(tmp_path / "model")
    code, out, err = run_cli(trainer.main, [
        "--problem=test_short_reverse", "--hparams_set=transformer_tiny",
        *train_flags(model_dir, short_reverse_data, 2, f"--hparams={OVERRIDES},{hparams}")],
        capsys)
    name, value = hparams.split("=")
    assert code == 2 and out == "", err
    (error,) = error_lines(err)
    assert f"error: hparam {name} must be " in error and f", got {float(value)}" in error
    assert not os.path.exists(f"{model_dir}/hparams.json")


@pytest.mark.parametrize("flag, message", [
    ("--alpha=nan", "--alpha must be in [0, 10], got nan"),
    ("--alpha=-0.5", "--alpha must be in [0, 10], got -0.5"),
    ("--beam_size=0", "--beam_size must be at least 1, got 0"),
    ("--extra_length=-1", "--extra_length must be at least 0, got -1"),
])
def test_decoding_flags_out_of_range_are_one_line(flag, message, model_copy, capsys):
    """--alpha=nan gave an empty translation and exit status 0."""
    from t2t_lite.cli import decoder

    source = os.path.join(model_copy, "source.txt")
    write_text_atomically(source, "1 2 3\n")
    code, out, err = run_cli(decoder.main, [f"--model_dir={model_copy}",
                                            f"--decode_from_file={source}", flag], capsys)
    assert code == 2 and out == "", err
    (error,) = error_lines(err)
    assert error == f"t2t-lite-decoder: error: {message} (see --help)"


@pytest.mark.parametrize("name, value, message", [
    ("d_model", 2**40, "hparam d_model must be at most 65536, got 1099511627776"),
    ("beam_size", 1e9, "hparam beam_size must be int, got 1000000000.0"),
    ("num_encoder_layers", 10**6, "hparam num_encoder_layers must be at most 1024, got 1000000"),
    ("alpha", float("nan"), "hparam alpha must be in [0, 10], got nan"),
])
def test_hparams_json_is_checked_as_strictly_as_hparams(
        name, value, message, model_copy, short_reverse_data, capsys):
    """Values no --hparams could set, written in hparams.json by hand: d_model=2**40 and
    beam_size=1e9 ran out of memory after 30 s, num_encoder_layers=1000000 hung the decoder."""
    from t2t_lite.cli import decoder, trainer

    path = f"{model_copy}/hparams.json"
    with open(path, encoding="utf-8") as f:
        values = json.load(f)
    write_text_atomically(path, json.dumps({**values, name: value}))
    with open(path, "rb") as f:
        recorded = f.read()
    source = os.path.join(model_copy, "source.txt")
    write_text_atomically(source, "1 2 3\n")
    for main, flags in ((decoder.main, [f"--model_dir={model_copy}",
                                        f"--decode_from_file={source}"]),
                        (trainer.main, train_flags(model_copy, short_reverse_data, 6))):
        code, out, err = run_cli(main, flags, capsys)
        assert code == 2 and out == "", err
        (error,) = error_lines(err)
        assert error == f"t2t-lite: error: {path}: {message}: correct that value in the file"
    with open(path, "rb") as f:
        assert f.read() == recorded


@pytest.mark.parametrize("name, content, reason", [
    ("hparams.json", '{"d_model": 32,',
     "not JSON: Expecting property name enclosed in double quotes at line 1 column 16"),
    ("hparams.json", "[32, 64]", "a list, not an object"),
    ("problem.json", '{"hparams_set": "transformer_tiny", "data_dir": "/tmp"}',
     'no "problem" string in it'),
    ("problem.json", '{"problem": "test_short_reverse", "hparams_set": "transformer_tiny", '
     '"data_dir": "/tmp", "init_from": {"init_from": "/m", "step": "4"}}',
     '"init_from" is not an object of "init_from", "model_dir", "checkpoint", "step", '
     '"optimizer"'),
    ("eval/history.json", '[{"step": 2, "metrics": {"loss": 4.',
     "not JSON: Expecting ',' delimiter at line 1 column 35"),
    ("eval/history.json", '[{"step": 2}]',
     'its entry 1 is not an object with "step" and "metrics"'),
    # Nested 100,000 deep: a RecursionError (a traceback) from json.
    ("hparams.json", "[" * 100_000 + "]" * 100_000, "JSON nested deeper than Python reads"),
    ("eval/history.json", '{"a":' * 100_000 + "1" + "}" * 100_000,
     "JSON nested deeper than Python reads"),
])
def test_a_damaged_record_of_the_model_dir_is_one_line(name, content, reason, model_copy,
                                                       short_reverse_data, capsys):
    """What the model_dir records (hparams.json, problem.json, eval/history.json) cut short or
    edited by hand: one line naming the file and how to mend it, before any work; the record
    is left as it is."""
    from t2t_lite.cli import decoder, trainer

    path = os.path.join(model_copy, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(content)
    source = os.path.join(model_copy, "source.txt")
    write_text_atomically(source, "1 2 3\n")
    runs = [(trainer.main, train_flags(model_copy, short_reverse_data, 6))]
    if "history" not in name:  # the decoder does not read the history
        runs.append((decoder.main, [f"--model_dir={model_copy}", f"--decode_from_file={source}"]))
    for main, argv in runs:
        code, out, err = run_cli(main, argv, capsys)
        assert code == 2 and out == "", err
        (error,) = error_lines(err)
        assert error.startswith(f"t2t-lite: error: {path} is damaged ({reason}): restore it "
                                "from a copy, or "), error
    with open(path, encoding="utf-8") as f:
        assert f.read() == content
    assert tf.train.latest_checkpoint(model_copy) == f"{model_copy}/ckpt-4"
