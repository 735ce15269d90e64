"""Console scripts: each module parses flags, calls the library and prints."""

import argparse
import logging
import os
import sys


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


def _import_tensorflow_quietly():
    """TensorFlow prints C++ start-up notices (oneDNN, CUDA probing) on stderr before its log
    level applies; they are hidden unless the user set TF_CPP_MIN_LOG_LEVEL."""
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        import tensorflow as tf

        tf.config.list_physical_devices()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def run(main, argv=None):
    """Runs main(argv) with progress logged to stderr (stdout holds only results, so pipes keep
    their line alignment); a UserError becomes one line on stderr and exit status 2."""
    from t2t_lite.utils.errors import UserError

    _import_tensorflow_quietly()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    logger = logging.getLogger("t2t_lite")
    saved = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        main(sys.argv[1:] if argv is None else argv)
    except (UserError, OSError) as error:
        prog = os.path.basename(sys.argv[0]) if argv is None else "t2t-lite"
        print(f"{prog}: error: {_one_line(error)}", file=sys.stderr)
        sys.exit(2)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def _one_line(error):
    """A UserError's message, or an OS fault the library did not name itself (a disk that
    fills, a path that vanishes) as the path, the OS's reason and where to look."""
    if not isinstance(error, OSError) or error.filename is None:
        return str(error)
    return (f"{error.filename}: {error.strerror}: check that path (free space, permissions, a "
            "file where a directory is expected)")
