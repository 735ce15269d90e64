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

    python benchmarks/export_time.py --model_dir M [M2 ...] [--repeats 5]
        [--sentences "1 2 3" "4 5 6 7"] [--checkouts before=/tmp/before after=.]
        [--record benchmarks/results/startup/export.json]

Several model_dirs (each PATH or NAME=PATH) are timed one after the other, on the same
--sentences; the record has a column of each (and of each checkout, with several).
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

import checkouts

sys.path.insert(0, os.path.dirname(__file__))
import record  # noqa: E402

# The record's names of the worker's phases.
PHASES = {"restore": "restore (imports included)", "export": "export", "load": "load",
          "first call": "first call"}


def models(specs):
    """["demo=/tmp/t2t_demo", "/tmp/parser"] -> {"demo": path, "parser": path}."""
    named = {}
    for spec in specs:
        name, separator, path = spec.partition("=")
        if not separator:
            name, path = os.path.basename(os.path.normpath(spec)), spec
        named[name] = path
    return named


def worker(args):
    """The phases of one fresh export in this process, printed as one JSON line."""
    phase = checkouts.Phases()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from t2t_lite.runner import Runner

    checkouts.check_imported_from(args.checkout)
    runner = Runner.from_model_dir(args.model_dir[0])  # a PATH: main passes one
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
    parser.add_argument("--model_dir", required=True, nargs="+", metavar="[NAME=]PATH",
                        help="a trained TensorFlow model_dir (or several, one after the other)")
    parser.add_argument("--sentences", nargs="+",
                        default=["1 2 3", "4 5 6 7 8", "9 0 9 0 1 1 2"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--checkouts", nargs="+", metavar="NAME=PATH",
                        help="time each checkout of t2t_lite (see checkouts.py)")
    record.add_record_flag(parser)  # a column per model_dir (and checkout)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--checkout", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    names = checkouts.parse(args.checkouts) if args.checkouts else {"installed": None}
    checkouts.print_load_average("before")
    # (sys.path starts with benchmarks/, which holds no t2t_lite to shadow the checkout's)
    results = {}
    for model, model_dir in models(args.model_dir).items():
        results[model] = checkouts.run_interleaved(names, args.repeats, lambda path: [
            sys.executable, __file__, "--worker", f"--model_dir={model_dir}",
            "--sentences", *args.sentences] + ([f"--checkout={path}"] if path else []))
    for model, by_checkout in results.items():
        for name, runs in by_checkout.items():
            print(f"\n{name if len(results) == 1 else f'{model}, {name}'}: median of "
                  f"{args.repeats} (s)")
            for phase in runs[0]["times"]:
                print(f"  {phase:12s} "
                      f"{statistics.median(r['times'][phase] for r in runs):6.2f}")
            print(f"  outputs: {runs[0]['outputs']}, scores {runs[0]['scores']}")
    print()
    checkouts.print_load_average("after")
    if args.record:
        columns = {f"{model}, {name}" if len(names) > 1 else model: runs
                   for model, by_checkout in results.items() for name, runs in by_checkout.items()}
        record.write_record(
            args.record, "Time to restore a model and write, load and call its SavedModel",
            ["phase"] + [{"name": f"{column} (s)", "digits": 2} for column in columns],
            [[label] + [round(statistics.median(r["times"][phase] for r in runs), 2)
                        for runs in columns.values()] for phase, label in PHASES.items()],
            notes=[", ".join(f"{model}: {path}" for model, path in models(args.model_dir).items())
                   + f"; serving_default called on {len(args.sentences)} sentences"] + [
                f"{name}: t2t_lite of {path}" for name, path in names.items() if path] + [
                f"fresh processes, interleaved by repeat; median of {args.repeats}"])


if __name__ == "__main__":
    main()
