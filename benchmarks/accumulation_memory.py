"""Peak memory of gradient accumulation: does accumulating K micro-batches per update cost the
memory of one micro-batch (plus one set of gradients), or of K?

Each configuration trains a few updates of a transformer_small-shaped model on fixed random
batches in its own process and reports that process's peak resident memory, so the runs do not
share an allocator. The model and micro-batch are the same in every run; only accumulate_steps
changes. A baseline process that builds the model but runs no step shows the fixed cost.

    python benchmarks/accumulation_memory.py [--accumulate 1 8] [--batch 64] [--length 64]
        [--record benchmarks/results/training/accumulation_memory.json]
"""

import argparse
import json
import os
import resource
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import record  # noqa: E402

VOCAB = 8000
SMALL = dict(num_encoder_layers=3, num_decoder_layers=3, d_model=256, d_ff=1024, num_heads=4)


def measure(accumulate_steps, batch, length, updates):
    """Peak RSS in MiB of this process after `updates` updates (none: the model alone)."""
    import numpy as np
    import tensorflow as tf

    from t2t_lite.config import HParams
    from t2t_lite.backends.tensorflow.trainer import Trainer

    trainer = Trainer(HParams(accumulate_steps=accumulate_steps, **SMALL), VOCAB)
    ids = np.random.default_rng(0).integers(3, VOCAB, (batch, length)).astype("int32")
    dataset = tf.data.Dataset.from_tensors(({"inputs": ids, "targets": ids}, ids)).repeat()
    iterators = trainer.distribute(lambda context: dataset)
    for _ in range(updates):
        trainer.train_step(iterators)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--accumulate", type=int, nargs="+", default=[1, 2, 8])
    parser.add_argument("--batch", type=int, default=64, help="sequences per micro-batch")
    parser.add_argument("--length", type=int, default=64, help="source = target tokens")
    parser.add_argument("--updates", type=int, default=3)
    record.add_record_flag(parser)
    parser.add_argument("--worker", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        accumulate_steps, updates, _ = args.worker
        print(json.dumps(measure(accumulate_steps, args.batch, args.length, updates)))
        return
    print(f"micro-batch: {args.batch} x {args.length} source and target tokens, "
          f"transformer_small shape, vocabulary {VOCAB}")
    rows = []
    for accumulate_steps, updates in [(1, 0)] + [(k, args.updates) for k in args.accumulate]:
        output = subprocess.run(
            [sys.executable, __file__, f"--batch={args.batch}", f"--length={args.length}",
             "--worker", str(accumulate_steps), str(updates), "0"],
            capture_output=True, text=True, check=True,
            env={"TF_CPP_MIN_LOG_LEVEL": "2", **os.environ}).stdout
        label = "model only, no step" if updates == 0 else f"accumulate_steps={accumulate_steps}"
        print(f"{label:24s} peak RSS {float(output.splitlines()[-1]):8.0f} MiB")
        rows.append([label, round(float(output.splitlines()[-1])), None])
    if args.record:
        record.write_record(
            args.record, f"Peak RSS of {args.updates} updates with accumulate_steps=K, "
            "micro-batches chained (as shipped) or not, transformer_small shape (vocabulary "
            f"{VOCAB:,}), micro-batch {args.batch} x {args.length} source and target tokens",
            ["configuration", "peak RSS MiB, chained (as shipped)", "peak RSS MiB, unchained"],
            rows, notes=["Each configuration in its own process; peak RSS of the process",
                         "The unchained column is the same command with the control "
                         "dependencies removed from Trainer._replica_step, as an A/B: this "
                         "script alone does not measure it"])


if __name__ == "__main__":
    main()
