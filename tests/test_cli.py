"""The trainer's command line: bad input gets one line and exit status 2, never a traceback."""

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf
from cli_output import error_lines

from t2t_lite import cli
from t2t_lite.cli import trainer
from t2t_lite.runner import Runner


def run_trainer(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.run(trainer.main, argv)
    return exit_info.value.code, capsys.readouterr().err


# Run at the exit of the command below: what its TensorFlow import brought in, and whether the
# modules kept out of it import as usual afterwards.
AT_EXIT = """
import atexit, sys
def imported():
    print(sorted(name for name in ("jax", "matplotlib") if name in sys.modules))
    import jax, matplotlib.pyplot
    print("importable")
atexit.register(imported)
from t2t_lite.cli.trainer import run; run()
"""


def test_unknown_problem_in_a_real_process_is_one_line(tmp_path):
    """And that process's TensorFlow came without JAX and matplotlib, which it imports when
    they are installed (~1 s of every command's start; backends/tensorflow/quiet.py): they
    were not imported, and import as usual afterwards."""
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [sys.executable, "-c", AT_EXIT, "--problem=algorithmic_revrse",
         "--hparams_set=transformer_tiny", f"--model_dir={tmp_path / 'model'}"],
        capture_output=True, text=True, timeout=120, env=environment)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [result.stderr.strip()]  # exactly one line
    assert "unknown problem 'algorithmic_revrse' (did you mean algorithmic_reverse" in result.stderr
    assert not (tmp_path / "model").exists()
    assert result.stdout == "[]\nimportable\n"


@pytest.mark.parametrize("flags, message", [
    (["--problem=algorithmic_reverse", "--hparams_set=transformer_tinny"],
     "unknown hparams set 'transformer_tinny' (did you mean transformer_tiny"),
    (["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", "--hparams=num_head=2"],
     "unknown hparam 'num_head' (did you mean num_heads"),
    (["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
      "--hparams=dropout=lots"], "hparam dropout expects float, got 'lots'"),
    (["--problem=algorithmic_reverse"], "pass --problem and --hparams_set"),
    (["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", "--train_steps=0"],
     "--train_steps must be positive"),
    (["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
      "--eval_beam_size=1025"], "--eval_beam_size must be at most 1024, got 1025"),
    (["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
      "--eval_beam_size=0"], "--eval_beam_size must be at least 1, got 0"),
    (["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", "--strategy=tpu"],
     "invalid choice: 'tpu'"),
])
def test_user_mistakes_exit_2_with_one_line(flags, message, tmp_path, capsys):
    code, err = run_trainer(flags + [f"--model_dir={tmp_path}"], capsys)
    assert code == 2
    assert len(error_lines(err)) == 1 and message in err


def test_registry_help_lists_problems_and_hparams_sets(capsys):
    cli.run(trainer.main, ["--registry_help"])
    out = capsys.readouterr().out
    assert "  algorithmic_reverse\n" in out and "  transformer_big_single_gpu\n" in out


def test_model_dir_remembers_its_experiment_and_refuses_contradictions(tmp_path, capsys):
    runner = Runner.create_or_resume(str(tmp_path), "algorithmic_copy", "transformer_tiny",
                                     "num_heads=2,dropout=0.2,d_model=16,d_ff=32")
    assert not (tmp_path / "hparams.json").exists()  # recorded once training starts
    runner.record_experiment()
    tf.train.Checkpoint(model=runner.trainer().model).save(str(tmp_path / "ckpt"))  # trained
    saved = json.loads((tmp_path / "hparams.json").read_text())
    assert saved["num_heads"] == 2 and saved["dropout"] == 0.2
    resumed = Runner.create_or_resume(str(tmp_path))
    assert resumed.problem_name == "algorithmic_copy" and resumed.hparams.num_heads == 2
    assert Runner.create_or_resume(str(tmp_path), hparams_set="transformer_tiny",
                                   overrides="num_heads=2").hparams == resumed.hparams

    for flags, message in [
        (["--problem=algorithmic_reverse"], "trained with --problem=algorithmic_copy"),
        (["--hparams=d_ff=64"], "trained with other values of d_ff"),
    ]:
        code, err = run_trainer(flags + [f"--model_dir={tmp_path}"], capsys)
        assert code == 2 and message in err


@pytest.mark.parametrize("script", ["trainer", "decoder"])  # the exporter runs on TensorFlow
def test_an_unknown_keras_backend_is_one_line(script, tmp_path):
    """KERAS_BACKEND=bogus ended in a 32-line traceback from Keras's import; the commands that
    run on KERAS_BACKEND name the backends they run on, before importing Keras, and write
    nothing."""
    model_dir = tmp_path / "model"
    result = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.argv[0] = 't2t-lite-{script}'; "
         f"from t2t_lite.cli.{script} import run; run()", f"--model_dir={model_dir}",
         "--problem=algorithmic_reverse", "--hparams_set=transformer_tiny"][:5 if script ==
                                                                            "trainer" else 4],
        env={**os.environ, "KERAS_BACKEND": "bogus"}, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2 and error_lines(result.stderr) == [
        f"t2t-lite-{script}: error: Keras runs on bogus, which t2t_lite does not support: set "
        "KERAS_BACKEND=tensorflow or KERAS_BACKEND=jax"], result.stderr
    assert not model_dir.exists()
