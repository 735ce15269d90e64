"""t2t-lite-exporter: writes a trained model_dir as a SavedModel that translates raw strings, or
as a CTranslate2 model directory."""

import os

from t2t_lite import cli
from t2t_lite.cli import translating


def parse_args(argv):
    parser = cli.ArgumentParser(prog="t2t-lite-exporter", description=__doc__)
    translating.add_model_flags(parser)
    parser.add_argument("--export_dir", help="versions are written as numbered subdirectories, "
                        "as TensorFlow Serving expects (default: MODEL_DIR/export, or "
                        "MODEL_DIR/export_ctranslate2 for --format=ctranslate2)")
    parser.add_argument("--format", default="saved_model", choices=("saved_model", "ctranslate2"),
                        help="ctranslate2: a model directory for the CTranslate2 engine, with "
                        "its vocabulary (pip install 't2t_lite[ctranslate2]')")
    return translating.parse_with_quantization(parser, argv, "format", "ctranslate2")


def main(argv):
    args = parse_args(argv)
    if args.format == "ctranslate2":
        return export_ctranslate2(args)
    from t2t_lite.export.saved_model import export

    runner, translator = translating.translator_from_flags(args)
    path = export(translator, args.export_dir or os.path.join(runner.model_dir, "export"))
    print(f"exported {path}")
    return path


def export_ctranslate2(args):
    from t2t_lite.export import ctranslate2 as ctranslate2_export

    runner = translating.runner_from_flags(args)
    path = ctranslate2_export.export(
        runner, args.export_dir or os.path.join(runner.model_dir, "export_ctranslate2"),
        args.checkpoint_path, args.quantization or "float32")
    print(f"exported {path}")
    return path


def run():
    cli.run(main)
