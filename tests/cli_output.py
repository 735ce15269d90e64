"""Running a console script in the test's process, and reading what it wrote: its stderr holds
progress logs and errors."""


def error_lines(stderr):
    """The lines of `stderr` that report an error (the CLIs' `PROG: error: MESSAGE`)."""
    return [line for line in stderr.splitlines() if "error:" in line]


def run_cli(main, argv, capsys):
    """(exit status, stdout, stderr) of a console script's main run by t2t_lite.cli.run."""
    from t2t_lite import cli

    code = 0
    try:
        cli.run(main, argv)
    except SystemExit as exit_info:
        code = exit_info.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err
