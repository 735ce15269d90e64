"""Reading a checkpoint for decoding or export: another model's checkpoint is one line naming
the mismatch (it was a 200-line shape traceback), and a latest checkpoint that a training run
rotates away while it is read is replaced by the newest one (it was a NotFoundError traceback)."""

import glob
import os

import pytest
import tensorflow as tf
from cli_output import error_lines, run_cli

from t2t_lite.utils.files import write_text_atomically


def decode(model_dir, capsys, *flags):
    from t2t_lite.cli import decoder

    source = os.path.join(os.path.dirname(model_dir), "source.txt")
    write_text_atomically(source, "1 2 3\n4 5\n")
    return run_cli(decoder.main, [f"--model_dir={model_dir}", f"--decode_from_file={source}",
                                  *flags], capsys)


def test_another_models_checkpoint_is_one_line(model_copy, tmp_path, capsys):
    from t2t_lite.models.transformer import create_model
    from t2t_lite.runner import Runner

    runner = Runner.from_model_dir(model_copy)
    other = create_model(runner.hparams.replace(d_ff=128), runner.vocabulary.size)
    path = tf.train.Checkpoint(model=other).write(str(tmp_path / "other" / "ckpt-1"))
    code, out, err = decode(model_copy, capsys, f"--checkpoint_path={path}")
    (line,) = error_lines(err)
    assert code == 2 and out == "" and "Traceback" not in err
    assert line.endswith(
        f"error: {path} does not hold the weights of the model in {model_copy}/hparams.json (a "
        "tensor of shape (32, 128) where the model has (32, 64)): it is another model's; pass "
        "the --model_dir it was trained in"), line


def test_a_failed_restore_leaves_no_warnings_behind(model_copy, capsys, caplog):
    """The model_dir's own checkpoint under an hparams.json of another shape: after the one-line
    error, TensorFlow logged a warning for each value the failed restore left (70 lines at
    exit, when it is garbage collected); now nothing follows the error."""
    import gc
    import json

    with open(f"{model_copy}/hparams.json", encoding="utf-8") as f:
        hparams = json.load(f)
    write_text_atomically(f"{model_copy}/hparams.json", json.dumps({**hparams, "d_ff": 128}))
    code, _, err = decode(model_copy, capsys)
    assert code == 2 and "does not hold the weights of the model" in err
    gc.collect()
    logged = [r.getMessage() for r in caplog.records if r.name == "tensorflow"]
    assert logged == [] and capsys.readouterr().err == ""


def rotate_on_first_read(monkeypatch, model_dir):
    """As a trainer with --keep_checkpoints=1 would between the decoder's choice of ckpt-4 and
    its reading it: saves ckpt-6 (here: ckpt-4's files renamed, so the weights are known) and
    deletes ckpt-4."""
    from t2t_lite.export import engines

    resolve = engines.resolve_checkpoint
    calls = []

    def resolve_then_rotate(*args):
        path = resolve(*args)
        if not calls:
            for name in glob.glob(f"{model_dir}/ckpt-4.*"):
                os.replace(name, name.replace("ckpt-4.", "ckpt-6."))
            write_text_atomically(f"{model_dir}/checkpoint", 'model_checkpoint_path: "ckpt-6"\n'
                                  'all_model_checkpoint_paths: "ckpt-6"\n')
        calls.append(path)
        return path

    monkeypatch.setattr(engines, "resolve_checkpoint", resolve_then_rotate)
    return calls


@pytest.mark.parametrize("engine", ["tensorflow", "ctranslate2"])
def test_a_checkpoint_rotated_away_while_read_gives_way_to_the_newest(
        model_copy, capsys, monkeypatch, engine):
    """With CTranslate2, ckpt-4's conversion is cached by the first run: the second finds its
    checkpoint gone as it computes the cache's key (an OS error's line before)."""
    expected_code, expected, _ = decode(model_copy, capsys, f"--engine={engine}")
    assert expected_code == 0 and len(expected.splitlines()) == 2
    calls = rotate_on_first_read(monkeypatch, model_copy)
    code, out, err = decode(model_copy, capsys, f"--engine={engine}")
    assert code == 0, err
    assert calls == [f"{model_copy}/ckpt-4", f"{model_copy}/ckpt-6"]
    assert (f"{model_copy}/ckpt-4 was removed while it was read; reading the newest, "
            f"{model_copy}/ckpt-6") in err
    assert out == expected  # the same weights, under their new name


def test_a_chosen_checkpoint_removed_while_read_is_one_line(model_copy, capsys, monkeypatch):
    """--checkpoint_path names the user's choice: not silently replaced by another."""
    rotate_on_first_read(monkeypatch, model_copy)
    code, out, err = decode(model_copy, capsys, f"--checkpoint_path={model_copy}/ckpt-4")
    (line,) = error_lines(err)
    assert code == 2 and out == "" and "Traceback" not in err
    assert line.endswith(f"error: checkpoint {model_copy}/ckpt-4 was removed while it was read "
                         "(a trainer keeping only its newest checkpoints?): run the same "
                         "command again"), line


def test_a_checkpoint_gone_is_not_taken_for_the_other_trainers(tmp_path, monkeypatch):
    """On JAX, a checkpoint that a trainer saving every step rotated away between the decoder's
    choice and its read was called "a checkpoint of the TensorFlow trainer" (no .weights.h5:
    so, it reasoned, the other kind); it is gone, and is read again as above."""
    from t2t_lite.training import model_weights
    from t2t_lite.training.checkpoint_list import CheckpointGone

    gone = str(tmp_path / "ckpt-213")
    monkeypatch.setattr(model_weights.keras.config, "backend", lambda: "jax")
    with pytest.raises(CheckpointGone):
        model_weights.restore_model(None, gone)
    for backend in ("jax", "tensorflow"):
        with pytest.raises(CheckpointGone):
            model_weights.check_resumable(gone, backend)
