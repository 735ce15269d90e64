"""Training throughput and MFU: t2t_lite's Trainer (graph, XLA) vs HuggingFace MarianMTModel.

The same architecture on both sides, random weights, float32 on the CPU: one fixed batch of 128
sequences x 32 source and 32 target tokens (all real, no padding), label smoothing 0.1, dropout
0.1 (as in training), Adam (t2t_lite: its Trainer, the path of `t2t-lite-trainer`) against
torch.optim.AdamW. Model FLOPs utilization (MFU) is the analytic matmul FLOPs of a step
(`training_flops`) per second, over the peak float32 matmul throughput of each framework, so that
it reads against both TensorFlow's and PyTorch's kernels. The matmuls are timed in every round
alongside the training steps and the best round is the peak: on a shared machine a peak measured
once can catch a loaded moment and make the MFU exceed 100%.

Every configuration runs in its own worker process, so that thread pools never compete and each
has its own peak RSS; each is warmed up (tracing, XLA compilation) and then timed `--repeats`
times, interleaved so that load from other processes falls on all of them alike; the median is
reported, and the best round as a hint of what a quiet machine gives. Workers run with
OMP_WAIT_POLICY=PASSIVE unless it is set: PyTorch's OpenMP threads otherwise spin at every
barrier, which on a shared 2-CPU machine made HF's steps 2-3x slower whenever another process
took a core (TensorFlow's thread pool does not use OpenMP and is unaffected).

    pip install -r benchmarks/requirements.txt
    python benchmarks/training.py [--shapes small base] [--repeats 3] [--threads 2]

Before/after a change, in one run (t2t_lite only, from each checkout; see checkouts.py):

    python benchmarks/training.py --checkouts main=/work/main branch=.

Half precision against float32 (t2t_lite only, graph mode; MFU still reads against float32's
matmul peak):

    python benchmarks/training.py --shapes small --precisions float32 mixed_float16 mixed_bfloat16

As results records (docs/results_pages.py): `--record PATH` writes the training table
(benchmarks/results/training/training_throughput.json; with --precisions, the half precision
table, half_precision.json), `--record_matmuls PATH` the matmul table (matmul_peaks.json) and
`--record_flops PATH` the model FLOPs (model_flops.json).
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

import checkouts
import flops
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import record  # noqa: E402

BATCH, SOURCE_LENGTH, TARGET_LENGTH = 128, 32, 32
DROPOUT, LABEL_SMOOTHING = 0.1, 0.1
SHAPES = {
    "small": dict(num_encoder_layers=3, num_decoder_layers=3, d_model=256, d_ff=1024,
                  num_heads=4),
    "base": dict(num_encoder_layers=6, num_decoder_layers=6, d_model=512, d_ff=2048,
                 num_heads=8),
    # Only to check that the script runs.
    "tiny": dict(num_encoder_layers=1, num_decoder_layers=1, d_model=32, d_ff=64, num_heads=2),
}
VOCAB = {"small": 8000, "base": 32000, "tiny": 1000}
STEPS_PER_ROUND = {"small": 5, "base": 3, "tiny": 1}
WARMUP_CALLS = 2
TRAINERS = ("t2t_lite", "t2t_lite XLA", "HF transformers")
# name -> (m, k, n, b transposed): a square reference, the FFN's first matmul and the tied output
# projection as the models compute it, each over one base batch of 4096 tokens.
MATMULS = {
    "2048x2048 @ 2048x2048": (2048, 2048, 2048, False),
    "4096x512 @ 512x2048": (4096, 512, 2048, False),
    "4096x512 @ (32000x512)^T": (4096, 512, 32000, True),
}
MATMUL_WORKERS = {"tf": "TF matmul", "torch": "torch matmul"}
FRAMEWORK = {"t2t_lite": "tf", "t2t_lite XLA": "tf", "HF transformers": "torch",
             "TF matmul": "tf", "torch matmul": "torch"}
# --precisions: t2t_lite's graph training step in half precision, as "t2t_lite PRECISION".
HALF_PRECISIONS = ("mixed_float16", "mixed_bfloat16")
FRAMEWORK.update({f"t2t_lite {precision}": "tf" for precision in HALF_PRECISIONS})


def forward_flops(shape):
    """Matmul FLOPs of one forward pass over the batch, by part (see flops.py)."""
    return flops.forward_flops(SHAPES[shape], VOCAB[shape], BATCH, SOURCE_LENGTH, TARGET_LENGTH)


def training_flops(shape):
    """FLOPs of one training step: 3 x forward (see flops.py)."""
    return flops.training_flops(SHAPES[shape], VOCAB[shape], BATCH, SOURCE_LENGTH,
                                TARGET_LENGTH)


def random_batch(shape):
    """One batch of ids in [3, vocab): no PAD (0), EOS (1) or 2, so every slot is a real token;
    seeded, so both frameworks train on the same batch."""
    rng = np.random.default_rng(0)
    return {name: rng.integers(3, VOCAB[shape], (BATCH, length)).astype("int32")
            for name, length in (("inputs", SOURCE_LENGTH), ("targets", TARGET_LENGTH))}


def t2t_lite_step(shape, batch, jit_compile, precision="float32"):
    """One optimizer update through the real training path: Trainer.distribute + train_step."""
    import tensorflow as tf

    from t2t_lite.config import HParams

    Trainer = checkouts.imported("Trainer", "t2t_lite.backends.tensorflow.trainer",
                                 "t2t_lite.training.trainer", "t2t_lite.training")

    hparams = HParams(dropout=DROPOUT, label_smoothing=LABEL_SMOOTHING, precision=precision,
                      **SHAPES[shape])
    trainer = Trainer(hparams, VOCAB[shape], jit_compile=jit_compile)
    iterators = trainer.distribute(
        lambda context: tf.data.Dataset.from_tensors((batch, batch["targets"])).repeat())

    def step():
        sums = trainer.train_step(iterators)
        assert sums["tokens"] == BATCH * TARGET_LENGTH, sums
        return sums["loss"] / sums["tokens"]

    return step


def huggingface_step(shape, batch):
    """One AdamW update of MarianMTModel on the label-smoothed cross-entropy of all targets."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    config, vocab = SHAPES[shape], VOCAB[shape]
    model = MarianMTModel(MarianConfig(
        vocab_size=vocab, d_model=config["d_model"], encoder_layers=config["num_encoder_layers"],
        decoder_layers=config["num_decoder_layers"], encoder_ffn_dim=config["d_ff"],
        decoder_ffn_dim=config["d_ff"], encoder_attention_heads=config["num_heads"],
        decoder_attention_heads=config["num_heads"], max_position_embeddings=64,
        pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, activation_function="relu",
        scale_embedding=True, share_encoder_decoder_embeddings=True, dropout=DROPOUT)).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    inputs = torch.tensor(batch["inputs"], dtype=torch.long)
    labels = torch.tensor(batch["targets"], dtype=torch.long)
    decoder_inputs = torch.nn.functional.pad(labels[:, :-1], (1, 0), value=0)  # start = PAD

    def step():
        logits = model(input_ids=inputs, attention_mask=torch.ones_like(inputs),
                       decoder_input_ids=decoder_inputs).logits
        loss = torch.nn.functional.cross_entropy(
            logits.view(-1, vocab), labels.view(-1), label_smoothing=LABEL_SMOOTHING)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss.item()

    return step


def matmuls(framework):
    """{name: one float32 matmul} for each of MATMULS, on random inputs made once."""
    if framework == "tf":
        import tensorflow as tf

        def matmul(m, k, n, transposed):
            a, b = tf.random.normal((m, k)), tf.random.normal((n, k) if transposed else (k, n))
            return lambda: tf.matmul(a, b, transpose_b=transposed)[0, 0].numpy()
    else:
        import torch

        def matmul(m, k, n, transposed):
            a, b = torch.randn(m, k), torch.randn(n, k) if transposed else torch.randn(k, n)
            b = b.T if transposed else b
            return lambda: torch.matmul(a, b)[0, 0].item()

    return {name: matmul(*dims) for name, dims in MATMULS.items()}


def matmul_flops(name):
    m, k, n, _ = MATMULS[name]
    return 2 * m * k * n


def jobs(kind, shape):
    """{job name: (function, calls per timed round)} that a worker of `kind` serves."""
    if kind in MATMUL_WORKERS.values():
        # About 10^11 FLOPs per round: long enough to time, short enough to repeat.
        return {f"{kind}: {name}": (function, max(1, round(1e11 / matmul_flops(name))))
                for name, function in matmuls(FRAMEWORK[kind]).items()}
    batch = random_batch(shape)
    if kind == "HF transformers":
        step = huggingface_step(shape, batch)
    else:
        precision = kind.split()[1] if kind.split()[-1] in HALF_PRECISIONS else "float32"
        step = t2t_lite_step(shape, batch, jit_compile=kind == "t2t_lite XLA",
                             precision=precision)
    return {kind: (step, STEPS_PER_ROUND[shape])}


def set_threads(framework, threads):
    if framework == "tf":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    else:
        import torch

        torch.set_num_threads(threads)


def worker(kind, shape, threads, label="", checkout=None):
    """Serves timed rounds over stdin/stdout: for each job name read (each starts with
    `label`), the seconds per call of that round; at end of input, its peak RSS in MiB."""
    set_threads(FRAMEWORK[kind], threads)
    if FRAMEWORK[kind] == "tf":
        checkouts.check_imported_from(checkout)
    served = {label + name: job for name, job in jobs(kind, shape).items()}
    for name, (function, _) in served.items():  # warm-up: tracing, XLA compilation
        results = [function() for _ in range(WARMUP_CALLS)]
        print(f"{name} warm-up results: {results}", file=sys.stderr, flush=True)
    print("\t".join(served), flush=True)
    for name in sys.stdin:
        function, calls = served[name.strip()]
        start = time.perf_counter()
        for _ in range(calls):
            function()
        print((time.perf_counter() - start) / calls, flush=True)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, flush=True)


def start_workers(kinds, shape, threads, checkout_paths=None):
    """One worker process per kind (per checkout of checkout_paths {name: path}, if given),
    started one at a time so that warm-ups do not compete; returns {job name: its worker}."""
    workers = {}
    specs = ([(kind, f"{name} ", path) for name, path in checkout_paths.items() for kind in kinds]
             if checkout_paths else [(kind, "", None) for kind in kinds])
    for kind, label, checkout in specs:
        process = subprocess.Popen(
            [sys.executable, __file__, "--worker", kind, shape, f"--threads={threads}",
             f"--label={label}"] + ([f"--checkout={checkout}"] if checkout else []),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={"OMP_WAIT_POLICY": "PASSIVE", **checkouts.environment(checkout),
                 "TF_CPP_MIN_LOG_LEVEL": "2"})
        workers.update({name: process for name in process.stdout.readline().strip().split("\t")})
    return workers


def time_rounds(workers, repeats):
    """{job: seconds per call in each of `repeats` rounds of every job, interleaved}."""
    times = {name: [] for name in workers}
    for _ in range(repeats):
        for name, process in workers.items():
            process.stdin.write(name + "\n")
            process.stdin.flush()
            times[name].append(float(process.stdout.readline()))
    return times


def stop_workers(workers):
    """Ends the workers; returns {job name: peak RSS MiB of its worker}."""
    rss = {}
    for process in set(workers.values()):
        process.stdin.close()
        megabytes = float(process.stdout.readline())
        process.wait()
        rss.update({name: megabytes for name, owner in workers.items() if owner is process})
    return rss


def print_matmuls(times):
    """Prints the matmul table; returns {framework: best GFLOP/s over shapes and rounds}."""
    print("| framework | matmul (float32) | GFLOP/s (median) | GFLOP/s (best) |")
    print("| --- | --- | ---: | ---: |")
    peaks = {}
    for job, runs in times.items():
        kind, name = job.split(": ")
        median, best = (matmul_flops(name) / s / 1e9 for s in (statistics.median(runs), min(runs)))
        peaks[FRAMEWORK[kind]] = max(peaks.get(FRAMEWORK[kind], 0.0), best)
        print(f"| {kind.split()[0]} | {name} | {median:.0f} | {best:.0f} |")
    print("peaks: " + ", ".join(f"{framework} {peak:.0f} GFLOP/s"
                                for framework, peak in peaks.items()) + "\n")
    return peaks


def print_flops(shape):
    parts = forward_flops(shape)
    shares = ", ".join(f"{name} {flops / sum(parts.values()):.0%}" for name, flops in parts.items())
    print(f"{shape}: {training_flops(shape) / 1e9:,.0f} GFLOP per training step ({shares})")


def print_training(shape, times, rss, peaks):
    tokens = BATCH * TARGET_LENGTH
    for name, runs in times.items():
        seconds = statistics.median(runs)
        flops_per_second = training_flops(shape) / seconds / 1e9
        torch_mfu = f"{flops_per_second / peaks['torch']:.0%}" if "torch" in peaks else "-"
        print(f"| {shape} | {name} | {tokens / seconds:,.0f} | {tokens / min(runs):,.0f} | "
              f"{seconds * 1000:,.0f} | {flops_per_second / peaks['tf']:.0%} | {torch_mfu} | "
              f"{rss[name]:,.0f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="+", default=["small", "base"], choices=SHAPES)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--checkouts", nargs="+", metavar="NAME=PATH",
                        help="time t2t_lite (graph and XLA) from each of these checkouts "
                        "instead of t2t_lite and HF transformers")
    parser.add_argument("--precisions", nargs="+", choices=("float32", *HALF_PRECISIONS),
                        help="time only t2t_lite's graph training step, in these precisions")
    record.add_record_flag(parser)  # the training table (with --precisions, the precisions')
    record.add_record_flag(parser, "--record_matmuls", "the matmul table",
                           "training/matmul_peaks.json")
    record.add_record_flag(parser, "--record_flops", "the model FLOPs of each shape",
                           "training/model_flops.json")
    parser.add_argument("--worker", nargs=2, metavar=("KIND", "SHAPE"), help=argparse.SUPPRESS)
    parser.add_argument("--label", default="", help=argparse.SUPPRESS)
    parser.add_argument("--checkout", help=argparse.SUPPRESS)
    args = parser.parse_args()
    import training_records  # the --record* writers, beside this file
    if args.worker:
        return worker(*args.worker, args.threads, args.label, args.checkout)
    checkout_paths = checkouts.parse(args.checkouts) if args.checkouts else None
    trainers = TRAINERS[:2] if checkout_paths else TRAINERS
    if args.precisions:
        trainers = ["t2t_lite" if precision == "float32" else f"t2t_lite {precision}"
                    for precision in args.precisions]

    print(f"batch {BATCH} x {SOURCE_LENGTH} source + {TARGET_LENGTH} target tokens, dropout "
          f"{DROPOUT}, label smoothing {LABEL_SMOOTHING}, {args.threads} threads, median of "
          f"{args.repeats}; load average {os.getloadavg()[0]:.1f}", flush=True)
    matmul_kinds = (["TF matmul"] if checkout_paths or args.precisions
                    else MATMUL_WORKERS.values())
    matmul_workers = start_workers(matmul_kinds, "-", args.threads)
    matmul_times, results = {}, {}
    for shape in args.shapes:
        trainer_workers = start_workers(trainers, shape, args.threads, checkout_paths)
        times = time_rounds({**matmul_workers, **trainer_workers}, args.repeats)
        for name in matmul_workers:
            matmul_times.setdefault(name, []).extend(times.pop(name))
        results[shape] = times, stop_workers(trainer_workers)
        print(f"{shape} done; load average {os.getloadavg()[0]:.1f}", flush=True)
    stop_workers(matmul_workers)

    print()
    peaks = print_matmuls(matmul_times)
    for shape in args.shapes:
        print_flops(shape)
    print("\n| shape | framework | target tokens/s (median) | best | ms/step | MFU vs TF peak "
          "| MFU vs torch peak | peak RSS MiB |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for shape, (times, rss) in results.items():
        print_training(shape, times, rss, peaks)
    if args.record:
        write = (training_records.write_precisions_record if args.precisions
                 else training_records.write_training_record)
        write(args, results, peaks)
    if args.record_matmuls:
        training_records.write_matmuls_record(args, matmul_times, peaks)
    if args.record_flops:
        training_records.write_flops_record(args)


if __name__ == "__main__":
    main()
