"""Translation quality against training minutes on a real corpus, for several training recipes.

For each direction and recipe: datagen (a joint SentencePiece vocabulary, as the README's
own-corpus path makes one), `t2t-lite-trainer --train_minutes=M` with periodic dev evaluations
(their greedy dev BLEU, stamped with the minutes since training started, gives the curve), then
beam decoding of dev (and with --test, of test) by the last checkpoint, best/ and avg/, scored
with sacreBLEU here. Writes a JSON of everything and prints a Markdown table. Run it alone: the
minutes are wall-clock minutes on this machine.

    python benchmarks/quality.py --corpus ../shared/corpora/small_parallel_enja \\
        --directions en-ja --recipes transformer_small transformer_small_data --minutes 25

The corpus is already tokenized (words separated by spaces), so BLEU uses sacreBLEU's `none`
tokenizer: BLEU on the given tokens.
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time

import sacrebleu

sys.path.insert(0, os.path.dirname(__file__))
import record  # noqa: E402

# The README's own-corpus path: keep the best by dev BLEU and average the last 10 checkpoints
# (with a time budget the trainer spreads them over its cool-down); before the budget-aware
# schedule, a checkpoint every 50 updates at the paper's rate to the end.
AVERAGING = ["--keep_best_by=bleu", "--average_last=10"]
CONSTANT_TO_THE_END = ["--hparams=budget_cooldown=0", "--save_every=50"]


def small_data(*overrides, flags=()):
    """transformer_small_data's flags with `overrides` and sized weight decay off: the set had
    none until 2026-11-30, when the records of these recipes had been made."""
    return ["--hparams_set=transformer_small_data",
            "--hparams=" + ",".join([*overrides, "budget_max_weight_decay=0"]), *AVERAGING,
            *flags]


# The trainer's flags of each recipe, besides the budget, each as measured on the results page:
# the README's first own-corpus path, that set with the averaging flags (how much of the
# difference is the flags), the README's path now (the budget-aware schedule), the same without
# the cool-down (the path of the 60-minute results of 2026-11-26), and the set as it was until
# then (dropout 0.2). Those on transformer_small_data take its depth: 3+3 in the records made
# before 2026-11-29, 2+2 since (transformer_small_data_3x3 keeps the former).
RECIPES = {
    "transformer_small": ["--hparams_set=transformer_small", "--keep_best_by=bleu",
                          "--hparams=budget_cooldown=0"],
    "transformer_small_averaged": ["--hparams_set=transformer_small", *AVERAGING,
                                   *CONSTANT_TO_THE_END],
    "transformer_small_data": ["--hparams_set=transformer_small_data", *AVERAGING],
    "transformer_small_data_no_cooldown": small_data("budget_cooldown=0",
                                                     flags=["--save_every=50"]),
    "transformer_small_data_dropout02": small_data("dropout=0.2", "budget_cooldown=0",
                                                   flags=["--save_every=50"]),
    # The README's path with the published small-data recipes' dropout throughout, with the
    # set's 0.1 throughout, and with dropout sized by the epochs the budget allows.
    "transformer_small_data_dropout03": small_data("dropout=0.3", "budget_max_dropout=0"),
    "transformer_small_data_dropout01": small_data("dropout=0.1", "budget_max_dropout=0"),
    "transformer_small_data_sized_dropout": small_data("dropout=0.1", "budget_max_dropout=0.3"),
    # The README's path at three depths (issue 42, item 4: which learns more per CPU-minute):
    # the set's 3+3 until 2026-11-29 (the recipe transformer_small_data of the records made
    # before), one layer more on each side, and one less (the set's 2+2 since).
    "transformer_small_data_3x3": small_data("num_encoder_layers=3", "num_decoder_layers=3"),
    "transformer_small_data_4x4": small_data("num_encoder_layers=4", "num_decoder_layers=4"),
    "transformer_small_data_2x2": small_data("num_encoder_layers=2", "num_decoder_layers=2"),
    # The README's path with the cool-down over the budget's last 40% instead of its fifth
    # (issue 42, item 1: the schedule's shape chosen by measurement).
    "transformer_small_data_cooldown04": small_data("budget_cooldown=0.4"),
    # The README's path with other regularizers than dropout (issue 42, item 2: one that pays
    # in both directions): more label smoothing, and dropout on the attention weights and inside
    # the feed-forward network (fairseq's and Araabi & Monz 2020's small-data knobs).
    "transformer_small_data_label_smoothing02": small_data("label_smoothing=0.2"),
    "transformer_small_data_attention_relu_dropout": small_data("attention_dropout=0.1",
                                                                "relu_dropout=0.1"),
    # Decoupled weight decay (AdamW's) throughout: 0.1 shrinks the weights by ~30% over a
    # 15-minute run's summed learning rate (~3.3 at transformer_small_data's peak of 2e-3)
    # absent gradients; ten times that, a decay whose time constant, 1 / (rate * decay), is
    # ~500-1,000 updates.
    "transformer_small_data_weight_decay": small_data("weight_decay=0.1"),
    "transformer_small_data_weight_decay1": small_data("weight_decay=1.0"),
    # Weight decay sized by the epochs the budget allows (training/regularization.py): none up
    # to 15 epochs, 1.0 from 35 on, chosen a tenth of the way in. transformer_small_data has it
    # since 2026-11-30 (the records' "the set" before then has none: this recipe then, and
    # transformer_small_data_no_weight_decay since, is the comparison).
    "transformer_small_data_sized_weight_decay": ["--hparams_set=transformer_small_data",
                                                  "--hparams=budget_max_weight_decay=1.0",
                                                  *AVERAGING],
    "transformer_small_data_no_weight_decay": small_data(),
    # The set's rule with twice its most weight decay (2.0 from 35 epochs on; time constant
    # ~250 updates at the peak rate): whether a stronger decay opens a margin where the budget
    # shows the model a small corpus many times and the set still ends near training accuracy 1.
    "transformer_small_data_weight_decay2": ["--hparams_set=transformer_small_data",
                                             "--hparams=budget_max_weight_decay=2.0",
                                             *AVERAGING],
    # Averaging at a high rate with sized weight decay (issue 42, item 3: SWA-like averaging
    # against averaging over the cool-down): the set without the cool-down, its --average_last
    # checkpoints spread over the budget's last fifth at the paper's rate; and the path of
    # transformer_small_data_before with the set's sized weight decay (3+3, a checkpoint every
    # 50 updates), the best 25k average of 2026-11-30 (a run of that recipe before d4623b0).
    "transformer_small_data_spread_no_cooldown": ["--hparams_set=transformer_small_data",
                                                  "--hparams=budget_cooldown=0", *AVERAGING],
    "transformer_small_data_before_sized_weight_decay": [
        "--hparams_set=transformer_small_data",
        "--hparams=num_encoder_layers=3,num_decoder_layers=3,budget_cooldown=0", *AVERAGING,
        "--save_every=50"],
    # The set at the candidate's 3+3 depth, all else the set's (the cool-down, avg/'s checkpoints
    # spread over it, sized weight decay): whether the candidate's lead is its depth alone.
    "transformer_small_data_3x3_sized_weight_decay": [
        "--hparams_set=transformer_small_data",
        "--hparams=num_encoder_layers=3,num_decoder_layers=3", *AVERAGING],
    # The set with word dropout (issue 42, item 2's last named knob): each source and
    # decoder-input token's embedding dropped with probability 0.1 (Sennrich et al. 2016's) or 0.2.
    "transformer_small_data_word_dropout": ["--hparams_set=transformer_small_data",
                                            "--hparams=word_dropout=0.1", *AVERAGING],
    "transformer_small_data_word_dropout02": ["--hparams_set=transformer_small_data",
                                              "--hparams=word_dropout=0.2", *AVERAGING],
    # The set with half its batch (1,024 tokens an update; issue 42, item 4: what learns more
    # per CPU-minute): about twice the updates in the minutes over the same epochs, each noisier
    # (the small-data papers train on small batches). Its dev evaluations every 1,000 updates
    # come at the same tokens, and so the same number of them, as the set's every 500.
    "transformer_small_data_batch1024": ["--hparams_set=transformer_small_data",
                                         "--hparams=batch_size=1024", *AVERAGING,
                                         "--eval_every=1000"],
    # The set twice as wide and half as deep (issue 42, item 4: "d_model 512 with fewer
    # layers"): 1+1 layers of the paper's base width (d_model 512, d_ff 2048, h 8), all else the
    # set's; per target token about twice the set's multiply-adds.
    "transformer_small_data_d512_1x1": [
        "--hparams_set=transformer_small_data",
        "--hparams=num_encoder_layers=1,num_decoder_layers=1,d_model=512,d_ff=2048,num_heads=8",
        *AVERAGING],
    # The README's own-corpus path as issue 42 found it, for its final comparison at any
    # budget: the set's 3+3 layers then, the paper's rate to the end, a checkpoint every 50
    # updates for the average, no weight decay.
    "transformer_small_data_before": small_data(
        "num_encoder_layers=3", "num_decoder_layers=3", "budget_cooldown=0",
        flags=["--save_every=50"]),
}
FINAL_PUNCTUATION = tuple(".?!。？！．")
LOG_TIME = re.compile(r"^(\d\d):(\d\d):(\d\d) (.*)$")


def run(command, log_path):
    """Runs `command`, its output appended to log_path; returns the output's lines."""
    print("+", " ".join(command), file=sys.stderr, flush=True)
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(result.stdout + result.stderr)
    if result.returncode:
        sys.exit(f"{command[0]} failed (exit {result.returncode}); see {log_path}")
    return (result.stdout + result.stderr).splitlines()


def seconds_of(line):
    match = LOG_TIME.match(line)
    hours, minutes, seconds = map(int, match.groups()[:3])
    return hours * 3600 + minutes * 60 + seconds


def dev_curve(lines):
    """(minutes since training started, step, greedy dev BLEU) of each evaluation in a trainer
    log whose lines start with HH:MM:SS."""
    start, curve = None, []
    for line in filter(LOG_TIME.match, lines):
        text = LOG_TIME.match(line).group(4)
        if start is None and text.startswith("training "):
            start = seconds_of(line)
        found = re.match(r"eval at step (\d+): .*\bbleu ([\d.]+)", text)
        if found and start is not None:
            minutes = ((seconds_of(line) - start) % 86400) / 60
            curve.append((round(minutes, 1), int(found.group(1)), float(found.group(2))))
    return curve


def score(hypotheses_path, references_path):
    with open(hypotheses_path, encoding="utf-8") as f:
        hypotheses = f.read().splitlines()
    with open(references_path, encoding="utf-8") as f:
        references = f.read().splitlines()
    bleu = sacrebleu.metrics.BLEU(tokenize="none")
    return {"bleu": round(bleu.corpus_score(hypotheses, [references]).score, 2),
            "signature": str(bleu.get_signature()),
            "empty": sum(not h.strip() for h in hypotheses),
            "no_final_punctuation": sum(not h.strip().endswith(FINAL_PUNCTUATION)
                                        for h in hypotheses),
            "references_without_it": sum(not r.strip().endswith(FINAL_PUNCTUATION)
                                         for r in references)}


def write_records(args, runs):
    """Each direction's greedy dev curves (one chart) and beam scores as results records."""
    for direction in args.directions:
        entries = [entry for entry in runs if entry["direction"] == direction]
        pairs = f"_{args.train_pairs}pairs" if args.train_pairs else ""
        name = os.path.join(args.record_dir, f"{direction}{pairs}_{args.minutes:g}min")
        corpus = (f", the first {args.train_pairs:,} training pairs, vocabulary "
                  f"{args.vocab_size:,}" if args.train_pairs else "")
        record.write_record(
            f"{name}_curve.json",
            f"Greedy dev BLEU against minutes of training, {direction}{corpus}",
            ["recipe", "step", {"name": "minutes", "digits": 1},
             {"name": "greedy dev BLEU", "digits": 2}],
            [[entry["recipe"], step, minutes, bleu] for entry in entries
             for minutes, step, bleu in entry["dev_curve_greedy"]],
            notes=["the trainer's own dev evaluations, minutes since training started"],
            chart={"x": "minutes", "y": "greedy dev BLEU", "series": "recipe"})
        rows, signatures = [], set()
        for entry in entries:
            for checkpoint in ("last", "best", "avg"):
                dev, test = (entry.get(f"{checkpoint}_{split}_beam") for split in ("dev", "test"))
                if dev is None:
                    continue
                signatures.update(score["signature"] for score in (dev, test) if score)
                rows.append([entry["recipe"], checkpoint if checkpoint == "last" else
                             f"{checkpoint}/", dev["bleu"], test and test["bleu"], dev["empty"],
                             test and test["empty"], dev["no_final_punctuation"],
                             test and test["no_final_punctuation"]])
        record.write_record(
            f"{name}_beam.json", f"BLEU of beam search after {args.minutes:g} minutes, "
            f"{direction}{corpus}", ["recipe", "checkpoint", {"name": "dev BLEU", "digits": 2},
                             {"name": "test BLEU", "digits": 2}, "empty (dev)", "empty (test)",
                             "no final punctuation (dev)", "no final punctuation (test)"],
            rows, notes=[f"sacreBLEU {' '.join(sorted(signatures))}",
                         "each recipe's own beam size and alpha"])


def direction_work_dir(args, direction):
    """Where one direction's files, data, models and logs go: its corpus size in the name."""
    return os.path.join(args.work_dir, direction + (
        f"_{args.train_pairs}" if args.train_pairs else ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="train/dev/test.LANG files")
    parser.add_argument("--directions", nargs="+", default=["en-ja", "ja-en"])
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--eval_every", type=int, default=500)
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--train_pairs", type=int, help="train on the corpus's first N pairs "
                        "only (a smaller corpus: more epochs in the same minutes)")
    parser.add_argument("--seed", type=int, default=1, help="the trainer's --random_seed "
                        "(another one measures how far the seed alone moves the scores)")
    parser.add_argument("--alphas", type=float, nargs="*", default=[],
                        help="also decode dev with these alphas (best of the three models)")
    parser.add_argument("--test", action="store_true", help="decode and score test too (once)")
    parser.add_argument("--work_dir", default="/tmp/t2t_quality")
    parser.add_argument("--record_dir", help="also write each direction's dev curves and beam "
                        "scores as results records in this folder, e.g. "
                        "benchmarks/results/quality (docs/results_pages.py)")
    args = parser.parse_args()
    corpus = os.path.abspath(args.corpus)
    # The trainer would resume a model_dir left by an earlier call, and its minutes and scores
    # would then not be a fresh run's: refused before anything trains.
    for direction in args.directions:
        work = direction_work_dir(args, direction)
        for model_dir in (os.path.join(work, recipe) for recipe in args.recipes):
            if os.path.exists(model_dir):
                print(f"quality.py: error: {model_dir} holds an earlier run, which the trainer "
                      "would resume: move it aside, or give another --work_dir", file=sys.stderr)
                sys.exit(2)
    results = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
               "machine": os.uname().nodename, "cpus": os.cpu_count(),
               "load_before": os.getloadavg(), "args": vars(args), "runs": []}
    for direction in args.directions:
        source, target = direction.split("-")
        work = direction_work_dir(args, direction)
        files = os.path.join(work, "files")
        os.makedirs(files, exist_ok=True)
        for split in ("train", "dev", "test"):
            for language in (source, target):
                link = os.path.join(files, f"{split}.{language}")
                original = os.path.join(corpus, f"{split}.{language}")
                if os.path.exists(link):
                    continue
                if split == "train" and args.train_pairs:
                    with open(original, encoding="utf-8") as f:
                        lines = f.read().splitlines(keepends=True)[:args.train_pairs]
                    with open(link, "w", encoding="utf-8") as f:
                        f.writelines(lines)
                else:
                    os.symlink(original, link)
        problem, data_dir = f"quality_{source}{target}", os.path.join(work, "data")
        run(["t2t-lite-datagen", f"--problem={problem}", f"--files_dir={files}",
             f"--source_lang={source}", f"--target_lang={target}",
             f"--vocab_size={args.vocab_size}", f"--data_dir={data_dir}"],
            os.path.join(work, "datagen.log"))
        for recipe in args.recipes:
            model_dir = os.path.join(work, recipe)
            log = os.path.join(work, f"{recipe}.log")
            started = time.time()
            lines = run(["t2t-lite-trainer", f"--problem={problem}", f"--data_dir={data_dir}",
                         f"--model_dir={model_dir}", f"--train_minutes={args.minutes}",
                         "--train_steps=1000000", f"--eval_every={args.eval_every}",
                         "--bleu_tokenize=none", f"--random_seed={args.seed}",
                         *RECIPES[recipe]], log)
            entry = {"direction": direction, "recipe": recipe, "flags": RECIPES[recipe],
                     "wall_minutes": round((time.time() - started) / 60, 1),
                     "dev_curve_greedy": dev_curve(lines),
                     "final_log": [line for line in lines if "of the " in line
                                   or "final evaluation" in line or "budget" in line
                                   or "the run's" in line]}
            splits = ["dev", "test"] if args.test else ["dev"]
            for name in ("last", "best", "avg"):
                path = model_dir if name == "last" else os.path.join(model_dir, name)
                if not os.path.isdir(path):
                    continue
                for split in splits:
                    out = os.path.join(work, f"{recipe}.{name}.{split}.out")
                    run(["t2t-lite-decoder", f"--model_dir={path}",
                         f"--decode_from_file={files}/{split}.{source}",
                         f"--decode_to_file={out}"], log)
                    entry[f"{name}_{split}_beam"] = score(out, f"{files}/{split}.{target}")
            for alpha in args.alphas:
                path = os.path.join(model_dir, "avg" if os.path.isdir(
                    os.path.join(model_dir, "avg")) else "best")
                out = os.path.join(work, f"{recipe}.alpha{alpha}.dev.out")
                run(["t2t-lite-decoder", f"--model_dir={path}", f"--alpha={alpha}",
                     f"--decode_from_file={files}/dev.{source}", f"--decode_to_file={out}"],
                    log)
                entry[f"alpha_{alpha}_dev_beam"] = score(out, f"{files}/dev.{target}")
            results["runs"].append(entry)
            print(json.dumps(entry, indent=1), flush=True)
            save(results, args.work_dir)
    results["load_after"] = os.getloadavg()
    if args.record_dir:
        write_records(args, results["runs"])
    print(f"wrote {save(results, args.work_dir)}")


def save(results, work_dir):
    """Writes work_dir/quality.json atomically, after every run: a call stopped in its third
    run keeps the first two's scores."""
    path = os.path.join(work_dir, "quality.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    os.replace(path + ".tmp", path)
    return path


if __name__ == "__main__":
    main()
