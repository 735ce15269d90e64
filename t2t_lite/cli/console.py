"""What every console script shares: one-line usage errors, --usr_dir, and run(main): logging
to stderr, a UserError as one line and exit 2, Ctrl-C (at any moment) and a closed pipe as Unix
tools end."""

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, like every other user error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    def add_usr_dir_flag(self, registers="problems or hparams sets"):
        """--usr_dir, the user's module that registers `registers` (see import_usr_dir)."""
        self.add_argument("--usr_dir", help=f"a Python module or package registering {registers}"
                          " (your own, if not built in)")


def import_usr_dir(args):
    """Imports the module of --usr_dir, if given, so that what it registers is known."""
    if getattr(args, "usr_dir", None):
        from t2t_lite import registry

        registry.import_usr_dir(args.usr_dir)


def run(main, argv=None, tensorflow=True):
    """Runs main(argv) with progress logged to stderr (stdout holds only results, so pipes keep
    their line alignment); a UserError becomes one line on stderr and exit status 2, Ctrl-C one
    line and status 130, and a reader of stdout that went away (`| head -1`) a quiet exit.
    The backend's framework is imported first (quietly), but for a main that imports it only if
    it needs it (`tensorflow=False`)."""
    from t2t_lite import backends
    from t2t_lite.utils.errors import UserError

    prog = os.path.basename(sys.argv[0]) if argv is None else "t2t-lite"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    logger = logging.getLogger("t2t_lite")
    saved = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        with _sigint_honoured():
            if tensorflow:  # in here: start-up takes seconds, and Ctrl-C may come
                backends.current().import_framework()
            main(sys.argv[1:] if argv is None else argv)
            sys.stdout.flush()  # a pipe closed early fails here, not at the interpreter's exit
    except KeyboardInterrupt:
        # What the user asked for, not a fault: one line, and 128 + SIGINT as a shell reports
        # a process that Ctrl-C ended. Files are written atomically, so none is half-written.
        print(f"{prog}: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # The reader of our output went away (`t2t-lite-decoder ... | head -1`). Unix tools
        # (cat, grep, sort) are then ended by SIGPIPE silently and a shell reports 141 (128 +
        # SIGPIPE): so exit quietly with 141 too. A plain pipeline's status is head's either way;
        # under `set -o pipefail` the decoder then reads like any other tool cut short, rather
        # than like a run that wrote all of its output (0) or failed (2). stdout is pointed at
        # /dev/null so that the interpreter's last flush cannot fail again (the recipe of the
        # Python docs, "Note on SIGPIPE" in the signal module).
        _discard_stdout()
        sys.exit(141)
    except (UserError, OSError) as error:
        print(f"{prog}: error: {_one_line(error)}", file=sys.stderr)
        sys.exit(2)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


@contextlib.contextmanager
def _sigint_honoured():
    """SIGINT ends the command at any moment, even where it was started with SIGINT ignored,
    as a non-interactive shell starts a script's background jobs (`cmd &`): Ctrl-C or `kill -INT`
    would otherwise be lost until the trainer's own handler (training.preemption) is installed.
    The handler is given back afterwards, for a caller running several commands."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) != signal.SIG_IGN):
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _discard_stdout():
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # a stdout without a file descriptor (captured by a test)
        pass


def _one_line(error):
    """A UserError's message, or an OS fault the library did not name itself (a disk that
    fills, a path that vanishes) as the path, the OS's reason and where to look."""
    if not isinstance(error, OSError) or error.filename is None:
        return str(error)
    return (f"{error.filename}: {error.strerror}: check that path (free space, permissions, a "
            "file where a directory is expected)")
