"""Time to the first translation: how long `echo LINE | t2t-lite-decoder --model_dir=M` takes,
and where that time goes.

A user typing one sentence waits for Python, TensorFlow's import, the model's build and restore,
and tracing the search into a graph, before any translating. Measured in fresh processes (each
start pays all of it, as the user does):

  end to end   the decoder command on one stdin line, with the tensorflow engine and with
               --engine=ctranslate2 (its conversion cached beforehand, as after a first use),
               and CTranslate2 alone (import it, load the cached conversion, translate the
               line's tokens: the floor that the issue compares with);
  phases       inside one process: import TensorFlow, import t2t_lite's runner, read the
               model_dir, build and restore the model, the first translation of LINE (tracing
               included), the same again, then a line of another length;
  a file       --file_lines lines of lengths 1 to max_length - 1 (seeded, LINE's words), decoded
               by translate_tokens and by the n-best search (2 best) in batches of 32: how many
               times each search was traced, and the warm time of a second pass over the file
               (the decode speed a change must keep).

Runs are interleaved (one repeat of every configuration, then the next) so that load from other
processes falls on all alike; medians are printed, with the load average before and after.

    python benchmarks/first_translation.py --model_dir=/tmp/t2t_demo [--line "1 2 3 4 5 6 7"]
        [--repeats 5] [--file_lines 300] [--checkouts before=/tmp/lat_before after=.]

Without --checkouts it times the t2t_lite that Python imports. As results records
(docs/results_pages.py): `--record PATH` writes the end-to-end table
(benchmarks/results/startup/one_line.json), `--record_phases PATH` the phases (phases.json) and
`--record_traces PATH` the trace counts over the file (search_traces.json); with several
checkouts, a column of each.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import checkouts

sys.path.insert(0, os.path.dirname(__file__))
import record  # noqa: E402

DECODER = ("import sys; sys.argv[0] = 't2t-lite-decoder'; "
           "from t2t_lite.cli.decoder import run; run()")
CTRANSLATE2_ALONE = """
import json, sys, ctranslate2
path, tokens, beam = json.loads(sys.argv[1])
result = ctranslate2.Translator(path, device="cpu").translate_batch([tokens], beam_size=beam)
print(" ".join(result[0].hypotheses[0]))
"""


def run(command, env, stdin=""):
    """Seconds that `command` took to run to its end, failing if it did."""
    start = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{command} failed:\n{done.stderr[-2000:]}")
    return elapsed, done.stdout


def worker(model_dir, line, file_lines, checkout):
    """The phases and the file's trace counts in this process; printed as one JSON line."""
    phase = checkouts.Phases()
    times = phase.times
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # noqa: F401

    phase("import tensorflow")
    from t2t_lite.runner import Runner

    checkouts.check_imported_from(checkout)
    phase("import t2t_lite.runner")
    runner = Runner.from_model_dir(model_dir)
    phase("read model_dir")
    trained = runner.trained_model()
    model = trained.model()
    phase("build + restore model")
    translator = runner.translator(model)
    tokens = translator.vocabulary.encode(line)
    first = translator.translate_tokens([tokens])[0].text
    phase("first translation")
    assert translator.translate_tokens([tokens])[0].text == first
    phase("same line again")
    translator.translate_tokens([tokens + tokens[:1]])
    phase("a line 1 token longer")

    import random

    words = line.split()
    generator = random.Random(1)
    longest = runner.hparams.max_length - 1
    lines = [" ".join(generator.choice(words) for _ in range(generator.randint(1, longest)))
             for _ in range(file_lines)]
    token_lists = [translator.vocabulary.encode(text) for text in lines]
    translator = runner.translator(model)  # a fresh one: nothing traced yet
    counts = {}
    for name, decode, search in [
            ("translate_tokens", translator.translate_tokens, "_search"),
            ("n_best", lambda lists: translator.translate_n_best(lists, 2), "_n_best_search")]:
        started = time.perf_counter()
        decode(token_lists)
        times[f"file, {name}, first pass"] = time.perf_counter() - started
        started = time.perf_counter()
        decode(token_lists)
        times[f"file, {name}, second pass"] = time.perf_counter() - started
        counts[name] = getattr(translator, search).experimental_get_tracing_count()
    counts["batch shapes"] = len({(len(chunk), ids.shape[1])
                                  for chunk, ids in translator.batches(token_lists)})
    print(json.dumps({"times": times, "traces": counts, "first": first}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model_dir", required=True, help="a trained model_dir")
    parser.add_argument("--line", default="1 2 3 4 5 6 7", help="the one line translated")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--file_lines", type=int, default=300)
    parser.add_argument("--checkouts", nargs="+", metavar="NAME=PATH",
                        help="time each checkout of t2t_lite (see checkouts.py)")
    record.add_record_flag(parser)  # the end-to-end table
    record.add_record_flag(parser, "--record_phases", "the phases", "startup/phases.json")
    record.add_record_flag(parser, "--record_traces", "the searches' trace counts over the file",
                           "startup/search_traces.json")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--checkout", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.model_dir, args.line, args.file_lines, args.checkout)

    names = checkouts.parse(args.checkouts) if args.checkouts else {"installed": None}
    checkouts.print_load_average("before")
    # -P: not the working directory first on sys.path, which would shadow each checkout's
    # t2t_lite (on PYTHONPATH) with the one there.
    decoder = [sys.executable, "-P", "-c", DECODER, f"--model_dir={args.model_dir}"]
    line = args.line + "\n"
    # Convert for CTranslate2 once (cached in the model_dir), then warm the file cache.
    for name, path in names.items():
        _, output = run(decoder + ["--engine=ctranslate2"], checkouts.environment(path), line)
        _, expected = run(decoder, checkouts.environment(path), line)
        print(f"{name}: tensorflow engine '{expected.strip()}', ctranslate2 '{output.strip()}'")
    alone = [sys.executable, "-c", CTRANSLATE2_ALONE, json.dumps(ctranslate2_input(
        args.model_dir, args.line))]
    print("CTranslate2 alone:", run(alone, checkouts.environment(None))[1].strip())

    wall, phases = {}, {}
    for _ in range(args.repeats):
        wall.setdefault("CTranslate2 alone", []).append(run(alone, os.environ)[0])
        for name, path in names.items():
            env = checkouts.environment(path)
            for engine in ("tensorflow", "ctranslate2"):
                wall.setdefault(f"{name}: decoder --engine={engine}", []).append(
                    run(decoder + [f"--engine={engine}"], env, line)[0])
            _, output = run([sys.executable, __file__, "--worker", f"--model_dir={args.model_dir}",
                             f"--line={args.line}", f"--file_lines={args.file_lines}"]
                            + ([f"--checkout={path}"] if path else []), env)
            phases.setdefault(name, []).append(json.loads(output.splitlines()[-1]))

    print(f"\nend to end, one stdin line, median of {args.repeats} (s):")
    for label, seconds in wall.items():
        print(f"  {label:45s} {statistics.median(seconds):6.2f}  (best {min(seconds):.2f})")
    for name, results in phases.items():
        print(f"\n{name}: phases in one process, median of {args.repeats} (s):")
        for phase in results[0]["times"]:
            print(f"  {phase:45s} {statistics.median(r['times'][phase] for r in results):6.2f}")
        print(f"  traces over {args.file_lines} lines: {results[0]['traces']}")
    print()
    checkouts.print_load_average("after")
    write_records(args, names, wall, phases)


# The records' names of the end-to-end commands and of the searches.
COMMANDS = {"decoder --engine=tensorflow": "t2t-lite-decoder --model_dir=M (tensorflow engine)",
            "decoder --engine=ctranslate2": "t2t-lite-decoder --engine=ctranslate2 (cached "
                                            "conversion; imports no TensorFlow)"}
SEARCHES = {"translate_tokens": "translate_tokens (the stdin path and files)",
            "n_best": "n-best (2 best)"}


def write_records(args, names, wall, phases):
    """The records that --record, --record_phases and --record_traces ask for: a value column
    (two for the end-to-end table) per checkout, named after it when there are several."""
    def suffix(name):
        return f" ({name})" if len(names) > 1 else ""

    notes = [f"model: {args.model_dir}; the line: {args.line!r}"] + [
        f"{name}: t2t_lite of {path}" for name, path in names.items() if path]
    if args.record:
        columns, rows = ["command"], [[COMMANDS[key]] for key in COMMANDS]
        for name in names:
            columns += [{"name": f"s, median of {args.repeats}{suffix(name)}", "digits": 2},
                        {"name": f"s, best{suffix(name)}", "digits": 2}]
            for row, key in zip(rows, COMMANDS):
                seconds = wall[f"{name}: {key}"]
                row += [round(statistics.median(seconds), 2), round(min(seconds), 2)]
        seconds = wall["CTranslate2 alone"]
        rows.append(["CTranslate2 alone"] + [round(statistics.median(seconds), 2),
                                             round(min(seconds), 2)] * len(names))
        record.write_record(
            args.record, "One stdin line, end to end: the decoder's two engines and CTranslate2 "
            "alone", columns, rows,
            notes=notes + ["fresh processes, interleaved by repeat; median and the best",
                           "CTranslate2 alone: import ctranslate2, load the cached conversion, "
                           "translate the line's tokens (one measurement, whatever the "
                           "checkout)"])
    if args.record_phases:
        first = next(iter(phases.values()))[0]["times"]
        record.write_record(
            args.record_phases, "The TensorFlow engine's start-up, phase by phase, in one "
            "process", ["phase"] + [{"name": f"s{suffix(name)}", "digits": 2} for name in names],
            [[phase] + [round(statistics.median(r["times"][phase] for r in phases[name]), 2)
                        for name in names] for phase in first],
            notes=notes + ["times from the worker's start, each phase since the previous one; "
                           f"the interpreter's own start not counted; median of {args.repeats}",
                           f"the file: {args.file_lines} lines of 1 to max_length - 1 of the "
                           "line's words, in batches"])
    if args.record_traces:
        traces = {name: results[0]["traces"] for name, results in phases.items()}
        shapes = next(iter(traces.values()))["batch shapes"]
        record.write_record(
            args.record_traces, f"Traces of the search over a {args.file_lines}-line file's "
            f"{shapes} batch shape{'s' if shapes != 1 else ''}",
            ["search"] + [f"traces{suffix(name)}" for name in names],
            [[label] + [traces[name][key] for name in names] for key, label in SEARCHES.items()],
            notes=notes)


def ctranslate2_input(model_dir, line):
    """[path of the cached CTranslate2 conversion, LINE's tokens, the beam size]."""
    from t2t_lite.runner import Runner

    runner = Runner.from_model_dir(model_dir)
    root = os.path.join(model_dir, "ctranslate2")
    path = max((os.path.join(root, name) for name in os.listdir(root)), key=os.path.getmtime)
    tokens = runner.vocabulary.tokens()
    return [path, [tokens[i] for i in runner.vocabulary.encode(line)], runner.hparams.beam_size]


if __name__ == "__main__":
    main()
