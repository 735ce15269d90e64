"""Training and decoding speed of t2t_lite on Keras's JAX and TensorFlow backends, on a GPU or
the CPU: target tokens/s and model FLOPs utilization (MFU) of the trainers' real update step,
and beam-4 sentences/s of the translators' real search.

Training: random weights, one fixed batch of `--batch` sequences x `--length` source and target
tokens, all real (no padding), dropout and label smoothing as the hparams set says, Adam on the
paper's schedule, `--steps` updates timed after 3 of warm-up (compilation), each synchronized
(its loss read back). MFU is the analytic matmul FLOPs of a step (flops.py) per second over
the device's peak: a GPU's dense peak from its data sheet for the precision (TF32 for float32:
JAX's and TensorFlow's default for float32 matmuls on NVIDIA GPUs since Ampere), or on a CPU
the best float32 matmul rate measured here on the same backend.

Decoding: `--sentences` random inputs of `--length` tokens translated with beam 4 in batches of
32 by the backend's translator. A random model would end every output at once, so min_length
is `--length` and extra_length 0: each output is as long as the source with its EOS
(`--length` + 1 tokens) and an EOS, the same work on both backends; tokens/s counts the tokens
output (EOS included), as CTranslate2's benchmarks do.

Each backend runs in its own process; the JAX one never imports TensorFlow:

    KERAS_BACKEND=jax python benchmarks/backends.py --hparams_set transformer_base \\
        --precision mixed_bfloat16 --batch 256 --length 64
    KERAS_BACKEND=tensorflow python benchmarks/backends.py ...  [--jit_compile]
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import flops  # noqa: E402
import record  # noqa: E402

# Dense peaks (TFLOP/s) by device name and precision, from NVIDIA's data sheets.
GPU_PEAKS = {"H100 80GB HBM3": {"float32": 494.7, "mixed_bfloat16": 989.4},  # SXM
             "H100 PCIe": {"float32": 378.0, "mixed_bfloat16": 756.0},
             "H200": {"float32": 494.7, "mixed_bfloat16": 989.4},
             "A100": {"float32": 156.0, "mixed_bfloat16": 312.0}}


def backend():
    import keras

    return keras.config.backend()


def device_name():
    if backend() == "jax":
        import jax

        device = jax.devices()[0]
        return device.device_kind if device.platform == "gpu" else cpu_name()
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")
    return cpu_name()


def cpu_name():
    return f"CPU ({record.cpu_model()}, {os.cpu_count()} cores)"


def peak_flops(name, precision):
    """The device's peak for `precision` in FLOP/s: a GPU's from GPU_PEAKS, a CPU's measured."""
    for key, peaks in GPU_PEAKS.items():
        if key in name:
            return peaks[precision] * 1e12
    from keras import ops

    a = ops.ones((2048, 2048), "float32")
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        float(ops.sum(ops.matmul(a, a)[0]))
        best = min(best, time.perf_counter() - start)
    return 2 * 2048**3 / best


def trainer_step(hparams, vocab, batch, jit_compile):
    """One update of the backend's trainer on the fixed batch -> (loss, target tokens)."""
    features = ({"inputs": batch["inputs"], "targets": batch["targets"]}, batch["targets"])
    if backend() == "jax":
        from t2t_lite.backends.jax.trainer import JaxTrainer

        trainer = JaxTrainer(hparams, vocab)
        return lambda: trainer.train_step([features])
    import tensorflow as tf

    from t2t_lite.backends.tensorflow.trainer import Trainer

    trainer = Trainer(hparams, vocab, jit_compile=jit_compile)
    iterators = trainer.distribute(
        lambda context: tf.data.Dataset.from_tensors(features).repeat())
    return lambda: trainer.train_step(iterators)


def translator(hparams, vocab):
    from t2t_lite.data.vocabulary import SymbolVocabulary
    from t2t_lite.models.transformer import create_model

    model = create_model(hparams, vocab)
    if backend() == "jax":
        from t2t_lite.backends.jax.translator import JaxTranslator as Translator
    else:
        from t2t_lite.backends.tensorflow.translator import TensorFlowTranslator as Translator
    return Translator(model, SymbolVocabulary(vocab - 2), hparams, batch_size=32)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hparams_set", default="transformer_base")
    parser.add_argument("--precision", default="float32",
                        choices=("float32", "mixed_bfloat16"))
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--sentences", type=int, default=256, help="0: no decoding")
    parser.add_argument("--jit_compile", action="store_true", help="TensorFlow: XLA")
    parser.add_argument("--output", help="append the results to this JSON-lines file")
    record.add_record_flag(parser)
    args = parser.parse_args()

    from t2t_lite import registry

    hparams = registry.hparams(args.hparams_set).replace(
        precision=args.precision, max_length=max(256, 2 * args.length),
        beam_size=4, extra_length=0, min_length=args.length)
    rng = np.random.default_rng(0)
    batch = {name: rng.integers(3, args.vocab, (args.batch, args.length)).astype("int32")
             for name in ("inputs", "targets")}
    step = trainer_step(hparams, args.vocab, batch, args.jit_compile)
    for _ in range(3):
        step()
    start = time.perf_counter()
    for _ in range(args.steps):
        sums = step()
    seconds = (time.perf_counter() - start) / args.steps
    assert sums["tokens"] == args.batch * args.length, sums
    name = device_name()
    config = {k: getattr(hparams, k) for k in ("num_encoder_layers", "num_decoder_layers",
                                              "d_model", "d_ff")}
    step_flops = flops.training_flops(config, args.vocab, args.batch, args.length, args.length)
    peak = peak_flops(name, args.precision)
    result = {"backend": backend(), "device": name, "hparams_set": args.hparams_set,
              "precision": args.precision, "batch": args.batch, "length": args.length,
              "jit_compile": args.jit_compile or backend() == "jax",
              "ms_per_step": round(1000 * seconds, 1),
              "target_tokens_per_s": round(args.batch * args.length / seconds),
              "mfu": round(step_flops / seconds / peak, 3), "peak_tflops": round(peak / 1e12, 1),
              "date": time.strftime("%Y-%m-%d %H:%M"), "load": os.getloadavg()[0]}
    if args.sentences:
        decode = translator(hparams, args.vocab)
        sources = [list(rng.integers(3, args.vocab, args.length)) for _ in range(args.sentences)]
        decode.translate_tokens(sources[:32])  # compilation
        start = time.perf_counter()
        outputs = decode.translate_tokens(sources)
        seconds = time.perf_counter() - start
        tokens = sum(len(t.text.split()) + 1 for t in outputs)  # with EOS
        result.update(beam4_sentences_per_s=round(args.sentences / seconds, 1),
                      beam4_tokens_per_s=round(tokens / seconds),
                      beam4_mean_output_tokens=round(tokens / args.sentences, 1))
    print(json.dumps(result), flush=True)
    if args.output:
        with open(args.output, "a", encoding="utf-8") as f:
            f.write(json.dumps(result) + "\n")
    if args.record:
        gpu = name if not name.startswith("CPU") else None
        record.write_record(
            args.record, "Training and beam-4 decoding speed on each backend",
            ["hparams set", "precision", "backend", "batch x length",
             {"name": "ms/update", "digits": 1}, "target tokens/s",
             {"name": "peak TFLOP/s", "digits": 1}, {"name": "MFU", "digits": 3},
             {"name": "beam-4 sentences/s", "digits": 1}, "beam-4 tokens/s"],
            [[args.hparams_set, args.precision,
              result["backend"] + (" (jit_compile)" if args.jit_compile else ""),
              f"{args.batch} x {args.length}", result["ms_per_step"],
              result["target_tokens_per_s"], result["peak_tflops"], result["mfu"],
              result.get("beam4_sentences_per_s"), result.get("beam4_tokens_per_s")]],
            notes=["MFU: the model's matmul FLOPs per second over the peak, a GPU's dense peak "
                   "from its data sheet or a CPU's best float32 matmul measured in the run"],
            gpu=gpu, extend=True)


if __name__ == "__main__":
    main()
