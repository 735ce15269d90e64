"""Console scripts: each module parses flags, calls the library and prints.

TensorFlow's C++ start-up chatter is silenced before it is imported, unless the user asked for it.
"""

import logging
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def run(main, argv=None):
    """Runs main(argv); a UserError becomes one line on stderr and exit status 2."""
    from t2t_lite.errors import UserError

    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    logger = logging.getLogger("t2t_lite")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        main(sys.argv[1:] if argv is None else argv)
    except UserError as error:
        prog = os.path.basename(sys.argv[0]) or "t2t-lite"
        print(f"{prog}: error: {error}", file=sys.stderr)
        sys.exit(2)
    finally:
        logger.removeHandler(handler)
