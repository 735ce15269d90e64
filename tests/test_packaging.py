"""The installed package, seen from outside the repository, as a user's shell sees it: problems/
and hparams/ must import as t2t_lite.problems and t2t_lite.hparams whatever way pip installed
it (an egg-link to the repository root would put them at top level instead)."""

import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_problems_and_hparams_import_from_outside_the_repository(tmp_path):
    code = ("import t2t_lite.problems, t2t_lite.hparams\n"
            "print(t2t_lite.problems.__file__)\n"
            "print(t2t_lite.hparams.__file__)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PYTHONPATH": ""})
    assert result.returncode == 0, result.stderr
    problems_init, hparams_init = result.stdout.split()
    assert os.path.samefile(problems_init, os.path.join(REPO, "problems", "__init__.py"))
    assert os.path.samefile(hparams_init, os.path.join(REPO, "hparams", "__init__.py"))


def test_console_script_lists_the_built_in_problems_and_hparams_sets(tmp_path):
    trainer = shutil.which("t2t-lite-trainer", path=os.path.dirname(sys.executable))
    assert trainer, "t2t-lite-trainer is not installed beside this Python"
    result = subprocess.run([trainer, "--registry_help"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "  algorithmic_reverse\n" in result.stdout
    assert "  transformer_base\n" in result.stdout
