"""t2t-lite-exporter: writes a trained model_dir as a SavedModel that translates raw strings, or
as a CTranslate2 model directory."""

import importlib.util
import os
import sys

from t2t_lite import cli
from t2t_lite.cli import flags


def build_parser():
    """The flags, apart from parsing: the documentation's reference is generated from them."""
    from t2t_lite.export.engines import FORMATS

    parser = cli.ArgumentParser(prog="t2t-lite-exporter", description=__doc__)
    flags.add_model_flags(parser)
    parser.add_argument("--export_dir", help="versions are written as numbered subdirectories, "
                        "as TensorFlow Serving expects (default: MODEL_DIR/export, or "
                        "MODEL_DIR/export_ctranslate2 for --format=ctranslate2)")
    parser.add_argument("--format", default="saved_model", choices=FORMATS,
                        help="ctranslate2: a model directory for the CTranslate2 engine, with "
                        "its vocabulary (pip install 't2t_lite[ctranslate2]')")
    flags.add_quantization_flag(parser, "format", "ctranslate2")
    return parser


def parse_args(argv):
    # build_parser imports the engines: done here, inside cli.run, so that Ctrl-C meanwhile is
    # one line.
    return flags.parse_with_quantization(build_parser(), argv, "format", "ctranslate2")


def main(argv):
    args = parse_args(argv)
    runner = flags.runner_from_flags(args)
    path = runner.export(args.format, args.export_dir, checkpoint_path=args.checkpoint_path,
                         quantization=args.quantization or "float32",
                         **flags.decoding_flags(args))
    print(f"exported {path}")
    return path


def run():
    # A SavedModel is TensorFlow's format and the CTranslate2 converter reads the model through
    # TensorFlow, so the exporter runs Keras on TensorFlow whatever KERAS_BACKEND says (the
    # checkpoints of either backend's trainer load there).
    if importlib.util.find_spec("tensorflow") is None:
        print("t2t-lite-exporter: error: exporting needs TensorFlow, which is not installed "
              "here: pip install tensorflow", file=sys.stderr)
        sys.exit(2)
    os.environ["KERAS_BACKEND"] = "tensorflow"
    cli.run(main)
