"""t2t-lite-make-tf-configs: prints the TF_CONFIG of each worker of a multi-worker training run.

Every machine runs the same t2t-lite-trainer command with its own TF_CONFIG set; the trainer then
uses MultiWorkerMirroredStrategy. Worker 0 is the chief: it alone writes checkpoints and
summaries into --model_dir, which every worker must be able to read (a shared file system), so
that each can resume from the chief's checkpoints.
"""

import json

from t2t_lite import cli


def build_parser():
    """The flags, apart from parsing: the documentation's reference is generated from them."""
    parser = cli.ArgumentParser(prog="t2t-lite-make-tf-configs", description=__doc__)
    parser.add_argument("--workers", required=True,
                        help="comma-separated host:port of every worker, the chief first, e.g. "
                        "10.0.0.1:2222,10.0.0.2:2222")
    parser.add_argument("--index", type=int,
                        help="print only this worker's TF_CONFIG, as bare JSON")
    return parser


def parse_args(argv):
    """The flags of argv, --workers split into its addresses and each checked."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.workers = [address.strip() for address in args.workers.split(",") if address.strip()]
    for address in args.workers:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            parser.error(f"--workers: '{address}' is not host:port (e.g. 10.0.0.1:2222)")
    if len(set(args.workers)) < len(args.workers):
        parser.error("--workers names an address twice")
    if args.index is not None and not 0 <= args.index < len(args.workers):
        parser.error(f"--index must be in [0, {len(args.workers) - 1}], got {args.index}")
    return args


def tf_configs(workers):
    """The TF_CONFIG JSON of each worker, in order; the first is the chief."""
    return [json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}})
            for i in range(len(workers))]


def main(argv):
    args = parse_args(argv)
    configs = tf_configs(args.workers)
    if args.index is not None:
        print(configs[args.index])
        return
    for index, (address, config) in enumerate(zip(args.workers, configs)):
        role = " (chief)" if index == 0 else ""
        print(f"# worker {index}{role}, on {address.rpartition(':')[0]}:")
        print(f"export TF_CONFIG='{config}'")


def run():
    cli.run(main)
