"""Reading what a console script wrote: its stderr holds progress logs and errors."""


def error_lines(stderr):
    """The lines of `stderr` that report an error (the CLIs' `PROG: error: MESSAGE`)."""
    return [line for line in stderr.splitlines() if "error:" in line]
