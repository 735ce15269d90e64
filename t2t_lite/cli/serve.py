"""t2t-lite-serve: serves trained model_dirs over HTTP: a JSON API (POST /translate, /score; GET
/models, /healthz, /openapi.json) and a web page at / to translate and look at the attention."""

import os
import signal
import socket

from t2t_lite import cli
from t2t_lite.cli import flags


def build_parser():
    """The flags, apart from parsing: the documentation's reference is generated from them."""
    from t2t_lite.export.engines import ENGINE_NAMES

    parser = cli.ArgumentParser(prog="t2t-lite-serve", description=__doc__)
    parser.add_argument("--model_dir", required=True, nargs="+", metavar="MODEL_DIR",
                        help="trained model_dirs (e.g. MODEL_DIR/avg), each served under its "
                        "name: the last part of its path, or as many last parts as tell them "
                        "apart (my_ende/avg)")
    parser.add_argument("--data_dir", help="where the vocabulary now lives (default: the one "
                        "each model_dir was trained with)")
    parser.add_argument("--engine", choices=ENGINE_NAMES,
                        help="default: Keras's backend (tensorflow, or jax with "
                        "KERAS_BACKEND=jax); ctranslate2: the fastest on CPUs (pip install "
                        "'t2t_lite[ctranslate2]'), without n-best lists of the beam or attention")
    flags.add_quantization_flag(parser, "engine", "ctranslate2")
    parser.add_argument("--host", default="127.0.0.1",
                        help="the address to listen on (0.0.0.0: every interface)")
    parser.add_argument("--port", type=int, default=8080, help="0: any free port (logged)")
    parser.add_argument("--max_batch_tokens", type=int, default=4096,
                        help="concurrent requests with the same options are translated "
                        "together up to this many input tokens")
    parser.add_argument("--max_wait_ms", type=float, default=5.0,
                        help="how long a request waits for others to join its batch")
    parser.add_argument("--max_queue", type=int, default=1024,
                        help="inputs waiting at most; past it a request gets 503 with "
                        "Retry-After")
    parser.add_argument("--max_items", type=int, default=256,
                        help="inputs one request may hold (past it: 413)")
    parser.add_argument("--max_body_bytes", type=int, default=1 << 20,
                        help="the largest request body (past it: 413)")
    parser.add_argument("--batch_size", type=int, default=64,
                        help="sentences searched together within a batch (sorted by length)")
    parser.add_usr_dir_flag("the problems the models were trained on")
    return parser


def parse_args(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.quantization and args.engine != "ctranslate2":
        parser.error("--quantization needs --engine=ctranslate2")
    for name in ("max_batch_tokens", "max_queue", "max_items", "max_body_bytes", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be positive, got {getattr(args, name)}")
    if args.max_wait_ms < 0:
        parser.error(f"--max_wait_ms must be 0 or more, got {args.max_wait_ms}")
    if not 0 <= args.port < 65536:
        parser.error(f"--port must be in 0..65535, got {args.port}")
    if args.engine is None:
        from t2t_lite import backends

        args.engine = backends.current().name
    return args


def model_names(model_dirs):
    """Each path's name: as many of its last parts as tell it from the others."""
    parts = [os.path.normpath(os.path.abspath(path)).split(os.sep) for path in model_dirs]
    for count in range(1, max(map(len, parts)) + 1):
        names = ["/".join(p[-count:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    from t2t_lite.utils.errors import UserError

    raise UserError("a --model_dir is given twice: serve each once")


def listening_socket(host, port):
    """The socket the server will accept on, bound now, so that a port in use is one line and
    exit 2 rather than uvicorn's own exit."""
    from t2t_lite.utils.errors import UserError

    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)  # connections wait in the backlog until uvicorn accepts them
    except OSError as error:
        raise UserError(f"cannot listen on {host}:{port} ({error.strerror or error}): pass "
                        "another --port or --host") from None
    sock.set_inheritable(True)
    return sock


def main(argv):
    import logging

    from t2t_lite import backends
    from t2t_lite.runner import Runner
    from t2t_lite.serving.served_model import ServedModel
    from t2t_lite.utils.errors import UserError

    args = parse_args(argv)
    try:
        import uvicorn

        from t2t_lite.serving.app import Limits, create_app
        from t2t_lite.serving.batcher import Batcher
    except ImportError:
        raise UserError("t2t-lite-serve needs FastAPI and uvicorn: pip install "
                        "'t2t_lite[serve]'") from None
    logger = logging.getLogger("t2t_lite")
    if args.engine == backends.current().name:
        backends.current().import_framework()
    cli.import_usr_dir(args)
    models = {}
    for name, model_dir in zip(model_names(args.model_dir), args.model_dir):
        model = ServedModel(name, Runner.from_model_dir(model_dir, args.data_dir), args.engine,
                            quantization=args.quantization or "float32",
                            batch_size=args.batch_size)
        model.load()  # a model that cannot load is one line and exit 2, before the port opens
        models[name] = model
    sock = listening_socket(args.host, args.port)
    host, port = sock.getsockname()[:2]
    batcher = Batcher(args.max_batch_tokens, args.max_wait_ms, args.max_queue)
    app = create_app(models, batcher, Limits(args.max_body_bytes, args.max_items))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                           timeout_graceful_shutdown=60))
    stopped = []
    # uvicorn drains the requests in flight on SIGTERM and then raises the signal again: this
    # handler takes it then, so that a drained server exits 0.
    signal.signal(signal.SIGTERM, lambda number, frame: stopped.append(number))
    logger.info("serving %s on the %s engine at http://%s:%d/ (warming up)", ", ".join(models),
                args.engine, host if ":" not in host else f"[{host}]", port)
    server.run(sockets=[sock])
    logger.info("stopped%s: every request in flight was answered",
                " by SIGTERM" if stopped else "")


def run():
    cli.run(main, tensorflow=False)  # main imports it if its engine needs it
