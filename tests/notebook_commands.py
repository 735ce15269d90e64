"""Run in each notebook's kernel before its first cell (test_notebooks.py sends this file's
source): `!command` in IPython ignores the exit status; under the tests a failing command fails
its cell.

A `!t2t-lite-...` command without shell operators runs its console script's entry point (what
the installed script calls) in the kernel's process, with sys.argv as the shell would give it
and its stderr on the cell's stdout as `!` shows it: cli.run is made to be called in-process,
and this spares each command the ~5 CPU-s of a new process importing TensorFlow (12 commands in
the 4 notebooks: 154 -> 111 CPU-s for test_notebooks.py on 2 cores). tests/test_packaging.py
runs the installed scripts as processes.
"""

import contextlib as _contextlib
import shlex as _shlex
import sys as _sys
from importlib.metadata import entry_points as _entry_points

_shell = get_ipython()  # noqa: F821 -- IPython's, in the kernel
_run_shell = _shell.system
_SCRIPTS = {script.name: script for script in _entry_points(group="console_scripts")
            if script.name.startswith("t2t-lite-")}


def _run_script_here(argv):
    """The exit status of the console script argv[0] run here with sys.argv = argv."""
    entry, saved = _SCRIPTS[argv[0]].load(), _sys.argv
    _sys.argv = argv
    try:
        with _contextlib.redirect_stderr(_sys.stdout):
            entry()
    except SystemExit as stop:
        return 0 if stop.code is None else stop.code
    finally:
        _sys.argv = saved
    return 0


def _run_shell_and_check(command):
    expanded = _shell.var_expand(command, depth=1)  # the cell's {names}, as `!` expands them
    program = (expanded.split() or [""])[0]
    if program in _SCRIPTS and not set("|&;<>`$") & set(expanded):
        status = _run_script_here(_shlex.split(expanded))
    else:
        _run_shell(command)
        status = _shell.user_ns.get("_exit_code", 0)
    if status:
        raise RuntimeError(f"!{expanded} exited with status {status}")


_shell.system = _run_shell_and_check
