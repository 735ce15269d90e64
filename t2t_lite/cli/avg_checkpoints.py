"""t2t-lite-avg-checkpoints: averages the last N checkpoints of a model_dir into a new model_dir.

The paper averaged the last 5 checkpoints (written every 10 minutes) for its base models and the
last 20 for its big ones.
"""

from t2t_lite import cli


def build_parser():
    """The flags, apart from parsing: the documentation's reference is generated from them."""
    parser = cli.ArgumentParser(prog="t2t-lite-avg-checkpoints", description=__doc__)
    parser.add_argument("--model_dir", required=True, help="a trained model_dir")
    parser.add_argument("--n", type=int, default=5, help="how many of the latest checkpoints")
    parser.add_argument("--output_dir", required=True,
                        help="the new model_dir (must not exist, or be empty)")
    parser.add_usr_dir_flag("the problem the model was trained on")
    return parser


def parse_args(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n must be positive, got {args.n}")
    return args


def main(argv):
    from t2t_lite.runner import Runner
    from t2t_lite.training.checkpoint_list import last_checkpoints
    from t2t_lite.training.model_dir_copy import check_new_dir

    args = parse_args(argv)
    cli.import_usr_dir(args)
    runner = Runner.from_model_dir(args.model_dir)
    paths = last_checkpoints(runner.model_dir.path, args.n)
    check_new_dir(args.output_dir)  # before any work
    path = runner.average(paths, args.output_dir)
    print(f"wrote {path}")
    return path


def run():
    cli.run(main)
