"""t2t-lite-exporter: writes a trained model_dir as a SavedModel that translates raw strings."""

import os

from t2t_lite import cli
from t2t_lite.cli import translating


def parse_args(argv):
    parser = cli.ArgumentParser(prog="t2t-lite-exporter", description=__doc__)
    translating.add_model_flags(parser)
    parser.add_argument("--export_dir", help="versions are written as numbered subdirectories, "
                        "as TensorFlow Serving expects (default: MODEL_DIR/export)")
    return parser.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    from t2t_lite.export import export

    runner, translator = translating.translator_from_flags(args)
    path = export(translator, args.export_dir or os.path.join(runner.model_dir, "export"))
    print(f"exported {path}")
    return path


def run():
    cli.run(main)
