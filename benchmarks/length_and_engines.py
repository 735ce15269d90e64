"""How the length penalty (alpha) and the engine change beam outputs on real text: BLEU, empty
outputs, outputs without final punctuation (truncations, where nearly every reference has it),
and the lines on which the TensorFlow and CTranslate2 engines' outputs differ, for checkpoints
of a real model (a half-trained and a converged one, say).

    python benchmarks/length_and_engines.py --model_dir /tmp/t2t_quality/en-ja/transformer_small \\
        --checkpoints ckpt-1500 best --source dev.en --reference dev.ja --alphas 0 0.6 1.0

Decodes with t2t-lite-decoder, scores with sacreBLEU's `none` tokenizer (see quality.py), prints
JSON lines and a Markdown table; `--record benchmarks/results/decoding/length_and_engines.json`
also writes it as a results record (a row per checkpoint and alpha, the engines side by side).
"""

import argparse
import json
import os
import subprocess
import sys

from quality import score

sys.path.insert(0, os.path.dirname(__file__))
import record  # noqa: E402


def decode(model, checkpoint, engine, alpha, beam_size, min_length, source, out):
    command = ["t2t-lite-decoder", f"--model_dir={model}", f"--engine={engine}",
               f"--alpha={alpha}", f"--beam_size={beam_size}", f"--min_length={min_length}",
               f"--decode_from_file={source}", f"--decode_to_file={out}"]
    if checkpoint:
        command.append(f"--checkpoint_path={checkpoint}")
    print("+", " ".join(command), file=sys.stderr, flush=True)
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        sys.exit(result.stderr[-2000:])
    with open(out, encoding="utf-8") as f:
        return f.read().splitlines()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--checkpoints", nargs="+", default=["latest"],
                        help="ckpt-N in the model_dir (or a checkpoint's path), `best`, "
                        "`avg` or `latest`")
    parser.add_argument("--source", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.0, 0.6, 1.0])
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--min_lengths", type=int, nargs="+", default=[1])
    parser.add_argument("--engines", nargs="+", default=["tensorflow", "ctranslate2"])
    parser.add_argument("--work_dir", default="/tmp/t2t_length_and_engines")
    record.add_record_flag(parser)
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    rows = []
    for name in args.checkpoints:
        model, checkpoint = args.model_dir, None
        if name in ("best", "avg"):
            model = os.path.join(args.model_dir, name)
        elif name != "latest":
            checkpoint = os.path.join(args.model_dir, name)
        for min_length in args.min_lengths:
            for alpha in args.alphas:
                outputs = {}
                for engine in args.engines:
                    out = os.path.join(args.work_dir,
                                       f"{os.path.basename(name)}.{engine}.a{alpha}"
                                       f".m{min_length}.out")
                    outputs[engine] = decode(model, checkpoint, engine, alpha, args.beam_size,
                                             min_length, args.source, out)
                    row = {"checkpoint": name, "engine": engine, "alpha": alpha,
                           "min_length": min_length, "beam_size": args.beam_size,
                           **score(out, args.reference)}
                    if engine != args.engines[0]:
                        row["lines_differing_from_" + args.engines[0]] = sum(
                            a != b for a, b in zip(outputs[args.engines[0]], outputs[engine]))
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    print("\n| checkpoint | min_length | alpha | engine | BLEU | empty | no final punct. "
          "| lines differing |\n| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for row in rows:
        differing = next((v for k, v in row.items() if k.startswith("lines_differing")), "")
        print(f"| {row['checkpoint']} | {row['min_length']} | {row['alpha']} | {row['engine']} "
              f"| {row['bleu']} | {row['empty']} | {row['no_final_punctuation']} "
              f"| {differing} |")
    print(f"\nsacreBLEU: {rows[0]['signature']}")
    if args.record:
        write_record(args, rows)


def write_record(args, rows):
    """A row per checkpoint, min_length and alpha: BLEU, empty outputs and outputs without
    final punctuation of the TensorFlow and CTranslate2 engines, and the lines where they
    differ. "TF before" (the search before a change, as the page's table shows it) is left
    empty: this script runs one version of t2t_lite."""
    table = {}
    for row in rows:
        checkpoint = os.path.basename(row["checkpoint"])
        if len(args.min_lengths) > 1:
            checkpoint += f", min_length {row['min_length']}"
        cells = table.setdefault((checkpoint, f"{row['alpha']:g}"), {})
        cells[row["engine"]] = row
    columns = ["checkpoint", "alpha"]
    for name in ["TF before", "TF", "CTranslate2"]:
        columns += [{"name": f"{name} BLEU", "digits": 2}, f"{name} empty",
                    f"{name} no final punctuation"]
    columns.append("lines where TF and CTranslate2 differ")
    records = []
    for (checkpoint, alpha), cells in table.items():
        values = [None, None, None]
        for engine in ("tensorflow", "ctranslate2"):
            row = cells.get(engine, {})
            values += [row.get("bleu"), row.get("empty"), row.get("no_final_punctuation")]
        differ = cells.get("ctranslate2", {}).get("lines_differing_from_tensorflow")
        records.append([checkpoint, alpha] + values + [differ])
    record.write_record(
        args.record, "Alpha, minimum length and the two engines on the same model: BLEU, empty "
        f"outputs and outputs without final punctuation, beam {args.beam_size}, "
        f"{os.path.basename(args.source)} against {os.path.basename(args.reference)}",
        columns, records,
        notes=[f"The model: {args.model_dir}; checkpoints {' '.join(args.checkpoints)}; "
               f"min_length {' '.join(map(str, args.min_lengths))}",
               "TF before: the search before a change, which this script does not run (empty)",
               f"sacreBLEU `{rows[0]['signature']}`"])


if __name__ == "__main__":
    main()
