"""Where the test suite's CPU time goes: a pytest plugin that logs each test's setup, call and
teardown CPU seconds (the worker's own, and its subprocesses' that it waited for), and a report
of them by file and by test. The suite keeps 2 cores busy, so its time is its CPU work, and
--durations' wall times (each worker sharing the cores with the others) do not say which tests
cost it.

    PYTHONPATH=benchmarks SUITE_CPU_DIR=/tmp/suite_cpu python -m pytest -p suite_cpu \\
        -q -n auto --maxprocesses=4 --dist loadfile tests
    python benchmarks/suite_cpu.py /tmp/suite_cpu [--top 40]

A subprocess counts when the test waited for it (subprocess.run, Popen.wait); one left running
past its test counts in no test's time.
"""

import argparse
import collections
import glob
import json
import os
import resource
import sys

import pytest


def _cpu_seconds():
    """(this process's CPU seconds, its waited-for children's)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _logged(phase):
    @pytest.hookimpl(hookwrapper=True)
    def hook(item):
        own, children = _cpu_seconds()
        yield
        own_after, children_after = _cpu_seconds()
        directory = os.environ.get("SUITE_CPU_DIR", "suite_cpu")
        os.makedirs(directory, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(os.path.join(directory, f"{worker}.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps({"test": item.nodeid, "phase": phase, "own": own_after - own,
                                "children": children_after - children}) + "\n")
    return hook


pytest_runtest_setup = _logged("setup")
pytest_runtest_call = _logged("call")
pytest_runtest_teardown = _logged("teardown")


def report(directory, top):
    """The totals, then the files and the `top` test phases by CPU seconds, most first."""
    rows = []
    for path in glob.glob(os.path.join(directory, "*.jsonl")):
        with open(path, encoding="utf-8") as f:
            rows += [json.loads(line) for line in f]
    if not rows:
        print(f"suite_cpu.py: error: no CPU times in {directory}: run the suite with "
              "-p suite_cpu and SUITE_CPU_DIR set to it first", file=sys.stderr)
        sys.exit(2)
    own = sum(row["own"] for row in rows)
    children = sum(row["children"] for row in rows)
    print(f"{len(rows)} test phases: {own + children:.1f} CPU-s, of which subprocesses "
          f"{children:.1f} ({children / (own + children):.0%})")
    by_file, by_phase = collections.Counter(), collections.Counter()
    for row in rows:
        by_file[row["test"].split("::")[0]] += row["own"] + row["children"]
        by_phase[f"{row['test']} ({row['phase']})"] += row["own"] + row["children"]
    print("\nCPU-s  file")
    for name, seconds in by_file.most_common():
        print(f"{seconds:6.1f} {name}")
    print("\nCPU-s  test phase")
    for name, seconds in by_phase.most_common(top):
        print(f"{seconds:6.1f} {name}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", help="SUITE_CPU_DIR of the run")
    parser.add_argument("--top", type=int, default=40, help="test phases to list")
    args = parser.parse_args()
    report(args.directory, args.top)


if __name__ == "__main__":
    main()
