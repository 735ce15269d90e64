"""A/B runs: one benchmark timing several checkouts of t2t_lite (e.g. main and a branch) in the
same run, interleaved, so that the machine's load falls on all of them alike. Each worker
process imports t2t_lite from its own checkout (first on PYTHONPATH, ahead of the installed
one); the benchmark script itself is the one run."""

import json
import os
import subprocess
import time


def parse(specs):
    """["main=/work/main", "branch=/work/wt/branch"] -> {"main": path, "branch": path}."""
    checkouts = {}
    for spec in specs:
        name, separator, path = spec.partition("=")
        if not separator or not os.path.isdir(os.path.join(path, "t2t_lite")):
            raise SystemExit(f"--checkouts {spec}: expected NAME=PATH of a t2t_lite checkout")
        checkouts[name] = os.path.abspath(path)
    return checkouts


def environment(path):
    """The environment of a worker that must import t2t_lite from the checkout at `path`."""
    if path is None:
        return dict(os.environ)
    return {**os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [path, os.environ.get("PYTHONPATH")]))}


def imported(name, *modules):
    """`name` from the first of `modules` that has it: the module's home now, then its homes in
    older checkouts (before the backends/ wing, before the folders of commit db61a83), so that
    A/B runs can time those too."""
    import importlib

    for module in modules[:-1]:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):  # no such module, or the module had no such name
            continue
    return getattr(importlib.import_module(modules[-1]), name)


def check_imported_from(path):
    """Fails unless t2t_lite comes from the checkout at `path` (None: any)."""
    import t2t_lite

    actual = os.path.dirname(os.path.dirname(os.path.abspath(t2t_lite.__file__)))
    if path is not None and actual != path:
        raise SystemExit(f"t2t_lite was imported from {actual}, not from {path}")


class Phases:
    """A worker's clock: phases("name") records the seconds since the previous call (or since
    it was made) in phases.times, in order."""

    def __init__(self):
        self.times = {}
        self._start = time.perf_counter()

    def __call__(self, name):
        now = time.perf_counter()
        self.times[name] = now - self._start
        self._start = now


def run_interleaved(names, repeats, command):
    """{name: [the JSON its worker printed last, per repeat]} of the checkouts `names` (see
    parse), each worker command(path) run in a fresh process importing t2t_lite from its
    checkout; one run of every checkout, then the next, so that the machine's load falls on all
    of them alike."""
    results = {}
    for _ in range(repeats):
        for name, path in names.items():
            done = subprocess.run(command(path), capture_output=True, text=True,
                                  env=environment(path))
            if done.returncode:
                raise SystemExit(f"{name} failed:\n{done.stderr[-2000:]}")
            results.setdefault(name, []).append(json.loads(done.stdout.splitlines()[-1]))
    return results


def print_load_average(when):
    """Prints the load average `when` ("before", "after"): a busy machine slows every run."""
    with open("/proc/loadavg") as f:
        print(f"load average {when}:", f.read().strip())
