"""What the minimum output length costs the CTranslate2 engine: with min_length > 0 it asks
score_batch for the model's log-probabilities of every beam hypothesis (CTranslate2's own leave
EOS's share out), an extra teacher-forced pass over beam_size outputs per input.

Translates the same random inputs with the engine at min_length 0 (no rescoring) and 1 (the
default), interleaved, and reports sentences/s (median and best of --repeats) and how many
outputs differ; at each beam size of --beam in turn.

    python benchmarks/ctranslate2_min_length.py --model_dir=/tmp/t2t_demo [--lines 2000]
        [--beam 4 [1]] [--repeats 5]
        [--record benchmarks/results/decoding/ctranslate2_min_length.json]
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import record  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", default="/tmp/t2t_demo")
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--beam", type=int, nargs="+", default=[4],
                        help="beam size(s), each timed in turn (a table each)")
    parser.add_argument("--repeats", type=int, default=5)
    record.add_record_flag(parser)
    args = parser.parse_args()

    from t2t_lite.runner import Runner

    runner = Runner.from_model_dir(args.model_dir)
    rng = np.random.default_rng(0)
    size = runner.vocabulary.size
    token_lists = [rng.integers(3, size, rng.integers(1, 21)).tolist() for _ in range(args.lines)]
    rows = []
    for beam in args.beam:
        rows += compare(runner, token_lists, beam, args)
    if args.record:
        record.write_record(
            args.record, "The CTranslate2 engine's throughput at min_length 0 and 1, "
            f"{args.model_dir}, {args.lines:,} random inputs",
            ["beam", "min_length", "sentences/s (median)", "best sentences/s",
             "outputs that differ from min_length 0"], rows,
            notes=[f"{args.lines:,} random inputs of 1-20 tokens of the model's vocabulary",
                   f"The two settings interleaved; median and best of {args.repeats}"])


def compare(runner, token_lists, beam, args):
    """Times and prints min_length 0 and 1 at `beam`; returns the record's rows."""
    translators = {m: runner.translator(engine="ctranslate2", beam_size=beam, min_length=m)
                   for m in (0, 1)}
    times = {m: [] for m in translators}
    outputs = {}
    for _ in range(args.repeats):
        for m, translator in translators.items():
            start = time.perf_counter()
            outputs[m] = translator.translate_tokens(token_lists)
            times[m].append(time.perf_counter() - start)
    print(f"{args.model_dir}: {args.lines} random inputs of 1-20 tokens, beam {beam}, "
          f"median and best of {args.repeats}")
    print("| min_length | sentences/s (median) | best | outputs that differ from min_length 0 |")
    print("| ---: | ---: | ---: | ---: |")
    rows = []
    for m in translators:
        differ = sum(a.text != b.text for a, b in zip(outputs[m], outputs[0]))
        print(f"| {m} | {args.lines / statistics.median(times[m]):,.0f} | "
              f"{args.lines / min(times[m]):,.0f} | {differ} |")
        rows.append([beam, f"{m} (default)" if m == runner.hparams.min_length else str(m),
                     round(args.lines / statistics.median(times[m])),
                     round(args.lines / min(times[m])), differ])
    return rows


if __name__ == "__main__":
    main()
