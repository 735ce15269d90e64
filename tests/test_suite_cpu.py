"""benchmarks/suite_cpu.py, the plugin the README's account of the suite's CPU time comes from:
a test's CPU seconds are its process's own and those of the subprocesses it waited for, in the
phase that spent them, and the report adds them up as logged."""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "suite_cpu.py"
BUSY = ("import time\n"
        "end = time.process_time() + {seconds}\n"
        "while time.process_time() < end:\n"
        "    pass\n")
TESTS = f'''
import subprocess
import sys


def test_own():
{textwrap.indent(BUSY.format(seconds=0.5), "    ")}

def test_child():
    subprocess.run([sys.executable, "-c", {BUSY.format(seconds=0.5)!r}], check=True)
'''


def test_each_phase_counts_its_own_and_its_subprocesses_cpu_seconds(tmp_path):
    (tmp_path / "test_busy.py").write_text(TESTS)
    environment = {name: value for name, value in os.environ.items()
                   if name != "PYTEST_XDIST_WORKER"}  # this run is not one of the suite's workers
    environment.update(PYTHONPATH=str(SCRIPT.parent), SUITE_CPU_DIR=str(tmp_path / "cpu"))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "suite_cpu", "-p",
                          "no:cacheprovider", "test_busy.py"], cwd=tmp_path, env=environment,
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    lines = (tmp_path / "cpu" / "main.jsonl").read_text().splitlines()
    rows = {(row["test"].split("::")[1], row["phase"]): row for row in map(json.loads, lines)}
    assert sorted(rows) == sorted((test, phase) for test in ("test_own", "test_child")
                                  for phase in ("setup", "call", "teardown"))
    own, child = rows["test_own", "call"], rows["test_child", "call"]
    assert own["own"] >= 0.5 and own["children"] == 0
    assert child["children"] >= 0.5 and child["own"] < 0.25  # starting it is not running it

    report = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "cpu"), "--top", "1"],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    total, children = re.match(r"6 test phases: (\S+) CPU-s, of which subprocesses (\S+) ",
                               report).groups()
    assert float(total) == pytest.approx(sum(r["own"] + r["children"] for r in rows.values()),
                                         abs=0.05)
    assert float(children) == pytest.approx(sum(r["children"] for r in rows.values()), abs=0.05)
    test, phase = max(rows, key=lambda key: rows[key]["own"] + rows[key]["children"])
    assert report.splitlines()[-1].endswith(f"test_busy.py::{test} ({phase})")


def test_a_directory_without_times_is_one_line_and_exit_2(tmp_path):
    run = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True,
                         text=True, timeout=60, check=False)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == (f"suite_cpu.py: error: no CPU times in {tmp_path}: run the suite with "
                          "-p suite_cpu and SUITE_CPU_DIR set to it first\n")
