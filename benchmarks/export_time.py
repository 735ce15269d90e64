"""Time to write a SavedModel: what every `t2t-lite-exporter` run (and each export in the tests
and notebooks) pays, most of it tracing the five signatures into graphs.

In fresh processes, interleaved by repeat (one of every checkout, then the next), each worker
restores `--model_dir`'s latest checkpoint and times:

  restore          the model and its vocabulary (imports included)
  export           Runner.export: tracing the signatures and writing the new version
  load             tf.saved_model.load of that version
  first call       the exported serving_default on `--sentences`

and prints the exported model's outputs and scores, which checkouts that export the same graphs
print alike. Medians are printed, with the load average before and after.

    python benchmarks/export_time.py --model_dir M [--repeats 5]
        [--sentences "1 2 3" "4 5 6 7"] [--checkouts before=/tmp/before after=.]
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

import checkouts


def worker(args):
    """The phases of one fresh export in this process, printed as one JSON line."""
    phase = checkouts.Phases()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from t2t_lite.runner import Runner

    checkouts.check_imported_from(args.checkout)
    runner = Runner.from_model_dir(args.model_dir)
    runner.restored_model()
    phase("restore")
    export_dir = tempfile.mkdtemp(prefix="export_time")
    try:
        version = runner.export(export_dir=export_dir)
        phase("export")
        import tensorflow as tf

        loaded = tf.saved_model.load(version)
        phase("load")
        result = loaded.signatures["serving_default"](inputs=tf.constant(args.sentences))
        phase("first call")
    finally:
        shutil.rmtree(export_dir, ignore_errors=True)
    print(json.dumps({
        "times": phase.times,
        "outputs": [text.decode() for text in result["outputs"].numpy()],
        "scores": [round(float(score), 5) for score in result["scores"].numpy()]}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model_dir", required=True, help="a trained TensorFlow model_dir")
    parser.add_argument("--sentences", nargs="+",
                        default=["1 2 3", "4 5 6 7 8", "9 0 9 0 1 1 2"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--checkouts", nargs="+", metavar="NAME=PATH",
                        help="time each checkout of t2t_lite (see checkouts.py)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--checkout", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    names = checkouts.parse(args.checkouts) if args.checkouts else {"installed": None}
    checkouts.print_load_average("before")
    # (sys.path starts with benchmarks/, which holds no t2t_lite to shadow the checkout's)
    results = checkouts.run_interleaved(names, args.repeats, lambda path: [
        sys.executable, __file__, "--worker", f"--model_dir={args.model_dir}",
        "--sentences", *args.sentences] + ([f"--checkout={path}"] if path else []))
    for name, runs in results.items():
        print(f"\n{name}: median of {args.repeats} (s)")
        for phase in runs[0]["times"]:
            print(f"  {phase:12s} {statistics.median(r['times'][phase] for r in runs):6.2f}")
        print(f"  outputs: {runs[0]['outputs']}, scores {runs[0]['scores']}")
    print()
    checkouts.print_load_average("after")


if __name__ == "__main__":
    main()
