"""What the minimum output length costs the CTranslate2 engine: with min_length > 0 it asks
score_batch for the model's log-probabilities of every beam hypothesis (CTranslate2's own leave
EOS's share out), an extra teacher-forced pass over beam_size outputs per input.

Translates the same random inputs with the engine at min_length 0 (no rescoring) and 1 (the
default), interleaved, and reports sentences/s (median and best of --repeats) and how many
outputs differ.

    python benchmarks/ctranslate2_min_length.py --model_dir=/tmp/t2t_demo [--lines 2000]
        [--beam 4] [--repeats 5]
"""

import argparse
import statistics
import time

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", default="/tmp/t2t_demo")
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from t2t_lite.runner import Runner

    runner = Runner.from_model_dir(args.model_dir)
    rng = np.random.default_rng(0)
    size = runner.vocabulary.size
    token_lists = [rng.integers(3, size, rng.integers(1, 21)).tolist() for _ in range(args.lines)]
    translators = {m: runner.translator(engine="ctranslate2", beam_size=args.beam, min_length=m)
                   for m in (0, 1)}
    times = {m: [] for m in translators}
    outputs = {}
    for _ in range(args.repeats):
        for m, translator in translators.items():
            start = time.perf_counter()
            outputs[m] = translator.translate_tokens(token_lists)
            times[m].append(time.perf_counter() - start)
    print(f"{args.model_dir}: {args.lines} random inputs of 1-20 tokens, beam {args.beam}, "
          f"median and best of {args.repeats}")
    print("| min_length | sentences/s (median) | best | outputs that differ from min_length 0 |")
    print("| ---: | ---: | ---: | ---: |")
    for m in translators:
        differ = sum(a.text != b.text for a, b in zip(outputs[m], outputs[0]))
        print(f"| {m} | {args.lines / statistics.median(times[m]):,.0f} | "
              f"{args.lines / min(times[m]):,.0f} | {differ} |")


if __name__ == "__main__":
    main()
