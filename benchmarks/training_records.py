"""training.py's tables as results records (`--record`, `--record_matmuls`, `--record_flops`;
benchmarks/record.py writes them, docs/results_pages.py shows them): kept apart so that the
benchmark itself stays short."""

import statistics

import record
from training import (BATCH, DROPOUT, FRAMEWORK, HALF_PRECISIONS, LABEL_SMOOTHING, MATMULS,
                      SHAPES, SOURCE_LENGTH, STEPS_PER_ROUND, TARGET_LENGTH, VOCAB,
                      WARMUP_CALLS, forward_flops, matmul_flops, training_flops)


# The records' names of the frameworks whose matmuls are timed.
MATMUL_FRAMEWORKS = {"tf": "TensorFlow", "torch": "PyTorch"}


def method_notes(args, precision="float32"):
    return [f"Batch {BATCH} x {SOURCE_LENGTH} source + {TARGET_LENGTH} target tokens, dropout "
            f"{DROPOUT}, label smoothing {LABEL_SMOOTHING}, {precision}, {args.threads} threads",
            f"Median and best of {args.repeats} timed rounds of "
            + " or ".join(f"{STEPS_PER_ROUND[shape]} steps ({shape})" for shape in args.shapes)
            + f", after {WARMUP_CALLS} warm-up steps; rounds interleaved across configurations, "
            "one worker process each"]


def training_row(shape, name, runs, rss, peaks):
    """[target tokens/s (median), best, ms/step, MFU % vs TF's peak, vs torch's, peak RSS]
    of one configuration, rounded as print_training prints them."""
    tokens, seconds = BATCH * TARGET_LENGTH, statistics.median(runs)
    flops_per_second = training_flops(shape) / seconds / 1e9
    return [round(tokens / seconds), round(tokens / min(runs)), round(seconds * 1000),
            round(100 * flops_per_second / peaks["tf"]),
            round(100 * flops_per_second / peaks["torch"]) if "torch" in peaks else None,
            round(rss[name])]


def write_training_record(args, results, peaks):
    rows = [[1, shape, name] + training_row(shape, name, runs, rss, peaks)
            for shape, (times, rss) in results.items() for name, runs in times.items()]
    record.write_record(
        args.record, "Training throughput and MFU, t2t_lite's Trainer (graph, XLA)"
        + ("" if args.checkouts else " against HF MarianMTModel") + f", float32 on the CPU, "
        f"batch {BATCH} x {SOURCE_LENGTH} source + {TARGET_LENGTH} target tokens",
        ["run", "shape", "framework", "target tokens/s (median)", "best", "ms/step",
         "MFU vs TF peak (%)", "MFU vs torch peak (%)", "peak RSS MiB"], rows,
        notes=method_notes(args) + [
            f"Target tokens/s = {BATCH * TARGET_LENGTH:,} / seconds per step; MFU from the "
            "median step time against each framework's best matmul round of the run",
            "run: this run (one; a table of several runs numbers them)"])


def write_precisions_record(args, results, peaks):
    rows = []
    for shape, (times, rss) in results.items():
        for name, runs in times.items():
            words = name.split()  # [checkout] t2t_lite [precision]
            precision = words[-1] if words[-1] in HALF_PRECISIONS else "float32"
            checkout = words[0] if args.checkouts else ""
            float32 = times.get(" ".join(w for w in words if w not in HALF_PRECISIONS))
            row = training_row(shape, name, runs, rss, peaks)
            speed = (round(statistics.median(float32) / statistics.median(runs), 2)
                     if float32 else None)
            label = ", ".join(filter(None, [shape if len(args.shapes) > 1 else "",
                                            checkout, precision]))
            rows.append([label, row[0], row[1], row[2], speed, row[5]])
    record.write_record(
        args.record, "Half precision against float32 on the CPU, t2t_lite's graph training "
        f"step, {' and '.join(args.shapes)} shape, batch {BATCH} x {SOURCE_LENGTH} source + "
        f"{TARGET_LENGTH} target tokens",
        ["precision", "target tokens/s (median)", "best", "ms/step",
         {"name": "vs float32 (times)", "digits": 2}, "peak RSS MiB"], rows,
        notes=method_notes(args, "each row's precision") + [
            "vs float32: float32's median step time over this precision's"])


def write_matmuls_record(args, matmul_times, peaks):
    rows = {}
    for job, runs in matmul_times.items():
        kind, name = job.split(": ")
        row = rows.setdefault(FRAMEWORK[kind], {})
        row[name] = [round(matmul_flops(name) / s / 1e9) for s in (statistics.median(runs),
                                                                    min(runs))]
    record.write_record(
        args.record_matmuls, "Float32 matmul throughput in each framework, GFLOP/s, the peaks "
        "the MFU reads against",
        ["run", "framework"] + [f"{name} {which}" for name in MATMULS
                                for which in ("median", "best")] + ["peak (best)"],
        [[1, MATMUL_FRAMEWORKS[framework]] + [value for name in MATMULS
                                             for value in row.get(name, [None, None])]
         + [round(peaks[framework])] for framework, row in rows.items()],
        notes=[f"Median and best of {args.repeats * len(args.shapes)} rounds, timed in every "
               "round beside the training steps, "
               f"{args.threads} threads", "Peak: the framework's best matmul round of the run",
               "run: this run (one; a table of several runs numbers them)"])


def write_flops_record(args):
    """The model FLOPs of each shape (flops.py) and, for comparison, 6 x parameters x tokens
    with t2t_lite's parameter count."""
    from t2t_lite.config import HParams
    from t2t_lite.models.transformer import Transformer

    rows = []
    for shape in args.shapes:
        parts = forward_flops(shape)
        parameters = Transformer(HParams(**SHAPES[shape]),
                                 VOCAB[shape]).create_variables().count_params()
        rows.append([shape, round(training_flops(shape) / 1e9)]
                    + [round(100 * parts[name] / sum(parts.values()))
                       for name in ("encoder", "decoder", "output projection")]
                    + [round(6 * parameters * BATCH * (SOURCE_LENGTH + TARGET_LENGTH) / 1e9)])
    record.write_record(
        args.record_flops, "Model FLOPs of one training step (matmuls only), batch "
        f"{BATCH} x {SOURCE_LENGTH} source + {TARGET_LENGTH} target tokens",
        ["shape", "GFLOP per training step", "encoder (%)", "decoder (%)",
         "tied output projection (%)", "6 x parameters x tokens, GFLOP"], rows,
        notes=["Matmuls only, 2 FLOPs per multiply-add, training = 3 x forward, each weight "
               "matrix against the tokens it actually sees, attention scores and contexts in "
               "full (flops.training_flops); the same on any machine",
               "Last column, for comparison: 6 x t2t_lite's parameters x (source + target "
               "tokens), which counts every matrix, the embedding included, against both sides' "
               "tokens"])
