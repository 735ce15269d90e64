"""Time to the first update and the first evaluation of the TensorFlow trainer: what every
training run pays before it learns anything (and every short run in the tests pays again).

In fresh processes, interleaved by repeat (one of every checkout, then the next), each worker
builds a new model_dir of `--problem` and `--hparams_set` on a prepared data_dir and times:

  build trainer          the model, Adam and the checkpoint object
  first update           tracing the update step into a graph, then running it
  next N updates         the steady update speed a change must keep (ms per update printed)
  first evaluation       the dev set's loss and accuracy, tracing included
  second evaluation      the same again, traced already

and prints how many times each step was traced and the loss of the first 10 updates (seeded:
checkouts that build the same graphs print the same numbers). Medians are printed, with the
load average before and after.

    python benchmarks/first_update.py [--problem algorithmic_reverse]
        [--hparams_set transformer_tiny] [--updates 50] [--repeats 5]
        [--checkouts before=/tmp/before after=.]
        [--record benchmarks/results/startup/first_update.json]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

import checkouts

sys.path.insert(0, os.path.dirname(__file__))
import record  # noqa: E402


def worker(args):
    """The phases of one fresh run in this process, printed as one JSON line."""
    phase = checkouts.Phases()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras

    from t2t_lite import backends
    from t2t_lite.runner import Runner

    checkouts.check_imported_from(args.checkout)
    keras.utils.set_random_seed(1)
    runner = Runner.create_or_resume(tempfile.mkdtemp(prefix="first_update"), args.problem,
                                     args.hparams_set, "dropout=0.0", data_dir=args.data_dir)
    trainer = runner.trainer()
    phase("build trainer")
    iterators = trainer.distribute(backends.current().training_data(
        runner.problem, runner.data_dir, runner.hparams, 1, None))
    losses = [trainer.train_step(iterators)]
    phase("first update")
    for _ in range(args.updates):
        losses.append(trainer.train_step(iterators))
    phase(f"next {args.updates} updates")
    evaluations = [trainer.evaluate_split(runner.problem, "dev", runner.data_dir)]
    phase("first evaluation")
    evaluations.append(trainer.evaluate_split(runner.problem, "dev", runner.data_dir))
    phase("second evaluation")
    print(json.dumps({
        "times": phase.times,
        "traces": {"update": trainer._train_step.experimental_get_tracing_count(),
                   "evaluation": trainer._eval_step.experimental_get_tracing_count()},
        "losses": [round(sums["loss"] / sums["tokens"], 6) for sums in losses[:10]],
        "dev loss": round(evaluations[0]["loss"], 6)}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problem", default="algorithmic_reverse")
    parser.add_argument("--hparams_set", default="transformer_tiny")
    parser.add_argument("--data_dir", help="default: a temporary one, prepared once")
    parser.add_argument("--updates", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--checkouts", nargs="+", metavar="NAME=PATH",
                        help="time each checkout of t2t_lite (see checkouts.py)")
    record.add_record_flag(parser)  # a row per checkout
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--checkout", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    if not args.data_dir:
        from t2t_lite.runner import Runner

        args.data_dir = tempfile.mkdtemp(prefix="first_update_data")
        Runner.create_or_resume(f"{args.data_dir}.unused", args.problem, args.hparams_set,
                                data_dir=args.data_dir).prepare_data()
    names = checkouts.parse(args.checkouts) if args.checkouts else {"installed": None}
    checkouts.print_load_average("before")
    # (sys.path starts with benchmarks/, which holds no t2t_lite to shadow the checkout's)
    results = checkouts.run_interleaved(names, args.repeats, lambda path: [
        sys.executable, __file__, "--worker", f"--problem={args.problem}",
        f"--hparams_set={args.hparams_set}", f"--data_dir={args.data_dir}",
        f"--updates={args.updates}"] + ([f"--checkout={path}"] if path else []))
    for name, runs in results.items():
        print(f"\n{name}: median of {args.repeats} (s)")
        for phase in runs[0]["times"]:
            print(f"  {phase:25s} {statistics.median(r['times'][phase] for r in runs):6.2f}")
        steady = statistics.median(r["times"][f"next {args.updates} updates"] for r in runs)
        print(f"  {'ms per update':25s} {1000 * steady / args.updates:6.1f}")
        print(f"  traces: {runs[0]['traces']}")
        print(f"  first 10 losses: {runs[0]['losses']}, dev loss {runs[0]['dev loss']}")
    print()
    checkouts.print_load_average("after")
    if args.record:
        write_record(args, names, results)


def write_record(args, names, results):
    """A row per checkout (the --hparams_set, with the checkout's name when there are several):
    the phases' medians, the steady ms per update and the evaluation step's traces."""
    phases = ["build trainer", "first update", f"next {args.updates} updates",
              "first evaluation", "second evaluation"]
    rows = []
    for name, runs in results.items():
        median = {phase: statistics.median(r["times"][phase] for r in runs) for phase in phases}
        rows.append([args.hparams_set + (f" ({name})" if len(names) > 1 else "")]
                    + [round(median[phase], 2) for phase in phases[:3]]
                    + [round(1000 * median[phases[2]] / args.updates, 1)]
                    + [round(median[phase], 2) for phase in phases[3:]]
                    + [runs[0]["traces"]["evaluation"]])
    record.write_record(
        args.record, "Time to the first update and the first evaluation of a training run",
        ["model", {"name": "build trainer, imports included (s)", "digits": 2},
         {"name": "first update, tracing included (s)", "digits": 2},
         {"name": f"next {args.updates} updates (s)", "digits": 2},
         {"name": "ms per update (steady)", "digits": 1},
         {"name": "first evaluation, tracing included (s)", "digits": 2},
         {"name": "second evaluation (s)", "digits": 2}, "traces of the evaluation step"], rows,
        notes=[f"{args.problem}, {args.hparams_set}, dropout 0, seed 1"] + [
            f"{name}: t2t_lite of {path}" for name, path in names.items() if path] + [
            f"fresh processes, interleaved by repeat; median of {args.repeats}"])


if __name__ == "__main__":
    main()
