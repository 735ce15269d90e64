"""Decoding throughput: t2t_lite (graph, XLA, uncached), its CTranslate2 export (float32,
int8) and HuggingFace MarianMTModel; and BLEU of a trained model with each t2t_lite engine.

Same architecture and random weights' shapes everywhere, a batch of 32 sources of 24 tokens
(23 + EOS), beam 4 and greedy, exactly 32 generated tokens (EOS is made impossible: HF's
min_new_tokens, CTranslate2's min_decoding_length, and a logits mask here), on the CPU. The
CTranslate2 model is t2t_lite's own model converted by t2t_lite.export.ctranslate2. Each
configuration is warmed up once (tracing, XLA compilation) and then timed `--repeats` times,
interleaved so that load from other processes falls on all of them alike; the median is
reported, and the best run as a hint of what a quiet machine gives (the uncached decoder, which
recomputes the whole decoder for every token, is timed once).

With --bleu_model_dir, also translates --bleu_source with t2t-lite-decoder's engines (TensorFlow,
CTranslate2 float32 and int8; beam 4) and prints each one's BLEU against --bleu_reference and
its sentences/s (the decoder's own count, first-batch tracing included).

    pip install -r benchmarks/requirements.txt
    python benchmarks/decoding.py [--shapes small base] [--beams 4 1] [--repeats 3] [--threads 2]
        [--bleu_model_dir M --bleu_source src.txt --bleu_reference ref.txt]

Before/after a change, in one run (t2t_lite's TensorFlow engine only, from each checkout; see
checkouts.py):

    python benchmarks/decoding.py --no_uncached --checkouts main=/work/main branch=.

As results records (docs/results_pages.py): `--record PATH` writes the speed table (beam
sizes as columns; benchmarks/results/decoding/engines.json), `--record_kv_cache PATH` the
cached, XLA and uncached decoders at beam 4 (kv_cache.json, which needs the uncached decoder),
`--record_bleu PATH` the BLEU table of --bleu_model_dir (engines_bleu.json).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import checkouts
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import record  # noqa: E402

BATCH, SOURCE_LENGTH, OUTPUT_LENGTH, BEAM, VOCAB = 32, 24, 32, 4, 32000
SHAPES = {
    "tiny": dict(num_encoder_layers=1, num_decoder_layers=1, d_model=32, d_ff=64, num_heads=2),
    "small": dict(num_encoder_layers=3, num_decoder_layers=3, d_model=256, d_ff=1024,
                  num_heads=4),
    "base": dict(num_encoder_layers=6, num_decoder_layers=6, d_model=512, d_ff=2048,
                 num_heads=8),
}


def no_eos_model(shape):
    """A t2t_lite Transformer of `shape` with random weights that never ends a hypothesis
    early, so that every run generates OUTPUT_LENGTH tokens."""
    from keras import ops

    from t2t_lite.config import HParams

    EOS_ID = checkouts.imported("EOS_ID", "t2t_lite.config", "t2t_lite.text")
    Transformer = checkouts.imported("Transformer", "t2t_lite.models.transformer",
                                     "t2t_lite.model")

    class NoEosTransformer(Transformer):
        def _logits(self, x):
            logits = super()._logits(x)
            return ops.where(ops.arange(ops.shape(logits)[-1]) == EOS_ID, -1e9, logits)

    return NoEosTransformer(HParams(dropout=0.0, **SHAPES[shape]), VOCAB).create_variables()


def t2t_lite_decoders(shape, sources, beams, uncached):
    import tensorflow as tf

    search = checkouts.imported("search", "t2t_lite.decoding.search", "t2t_lite.decoding")
    try:
        SearchSettings = checkouts.imported("SearchSettings", "t2t_lite.decoding.search")
    except (ImportError, AttributeError):
        SearchSettings = None  # an older checkout, before the settings were one value

    model = no_eos_model(shape)
    extra_length = OUTPUT_LENGTH - SOURCE_LENGTH  # the limit is input length + extra_length
    inputs = tf.constant(sources)

    def searched(step_model, x, beam):
        if SearchSettings is None:  # older checkouts: search(model, inputs, beam_size, alpha,
            return search(step_model, x, beam, 0.6, extra_length)  # extra_length, ...)
        return search(step_model, x, SearchSettings(beam, 0.6, extra_length))

    def decoder(step_model, jit_compile, beam):
        function = tf.function(lambda x: searched(step_model, x, beam), jit_compile=jit_compile)
        return lambda: function(inputs)[0].numpy()

    decoders = {}
    for beam in beams:
        decoders[f"t2t_lite beam {beam}"] = decoder(model, False, beam)
        decoders[f"t2t_lite XLA beam {beam}"] = decoder(model, True, beam)
        if uncached and beam == BEAM:
            sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
            from reference_decoding import UncachedDecoder

            decoders[f"t2t_lite uncached beam {beam}"] = decoder(UncachedDecoder(model), False,
                                                                 beam)
    return decoders


def ctranslate2_decoders(shape, sources, beams, threads):
    """t2t_lite's model of `shape`, converted to CTranslate2, in float32 and with int8 weights."""
    import ctranslate2

    from t2t_lite.data.vocabulary import SymbolVocabulary
    from t2t_lite.export.ctranslate2 import save

    vocabulary = SymbolVocabulary(VOCAB - 2)
    path = os.path.join(tempfile.mkdtemp(prefix="ctranslate2-benchmark-"), "model")
    save(no_eos_model(shape), vocabulary, path)
    tokens = vocabulary.tokens()
    batch = [[tokens[i] for i in row[:-1]] for row in sources]  # CTranslate2 appends EOS

    def decoder(translator, beam):
        def decode():  # as the engine: GNMT's penalty (alpha 0.6) over the beam's hypotheses
            results = translator.translate_batch(
                batch, beam_size=beam, num_hypotheses=beam, length_penalty=0.0,
                max_decoding_length=OUTPUT_LENGTH, min_decoding_length=OUTPUT_LENGTH,
                max_input_length=0, suppress_sequences=[[tokens[0]]], return_scores=True)
            return [max(zip(r.scores, r.hypotheses),
                        key=lambda scored: scored[0] / ((6 + len(scored[1])) / 6) ** 0.6)[1]
                    for r in results]
        return decode

    decoders = {}
    for quantization in ("float32", "int8"):
        translator = ctranslate2.Translator(path, compute_type=quantization,
                                            intra_threads=threads)
        for beam in beams:
            decoders[f"CTranslate2 {quantization} beam {beam}"] = decoder(translator, beam)
    return decoders


def huggingface_decoders(shape, sources, beams):
    import torch
    from transformers import MarianConfig, MarianMTModel

    config = SHAPES[shape]
    model = MarianMTModel(MarianConfig(
        vocab_size=VOCAB, d_model=config["d_model"], encoder_layers=config["num_encoder_layers"],
        decoder_layers=config["num_decoder_layers"], encoder_ffn_dim=config["d_ff"],
        decoder_ffn_dim=config["d_ff"], encoder_attention_heads=config["num_heads"],
        decoder_attention_heads=config["num_heads"], max_position_embeddings=512,
        pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, forced_eos_token_id=None,
        dropout=0.0)).eval()
    input_ids = torch.tensor(sources, dtype=torch.long)

    def decoder(beam):
        def decode():
            with torch.inference_mode():
                return model.generate(
                    input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                    num_beams=beam, length_penalty=0.6, max_new_tokens=OUTPUT_LENGTH,
                    min_new_tokens=OUTPUT_LENGTH, do_sample=False).numpy()
        return decode

    return {f"HF transformers beam {beam}": decoder(beam) for beam in beams}


def generated_tokens(name, outputs):
    """The fewest tokens generated for a sentence (HF's outputs start with the decoder start
    token, PAD; t2t_lite's are PAD-padded after EOS; CTranslate2's are token lists without
    EOS)."""
    if name.startswith("CTranslate2"):
        return min(map(len, outputs))
    if name.startswith("HF"):
        outputs = outputs[:, 1:]
    return int((outputs > 1).sum(axis=1).min())


def worker(framework, shape, threads, beams, uncached, label="", checkout=None):
    """Serves timed decodes over stdin/stdout: one framework per process, so that TensorFlow's
    and PyTorch's thread pools never compete; its decoders' names start with `label`."""
    rng = np.random.default_rng(0)
    sources = rng.integers(2, VOCAB, (BATCH, SOURCE_LENGTH)).astype("int32")
    sources[:, -1] = 1  # EOS
    if framework == "tf":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
        checkouts.check_imported_from(checkout)
        decoders = t2t_lite_decoders(shape, sources, beams, uncached)
    elif framework == "ct2":
        decoders = ctranslate2_decoders(shape, sources, beams, threads)
    else:
        import torch

        torch.set_num_threads(threads)
        decoders = huggingface_decoders(shape, sources, beams)
    decoders = {label + name: decode for name, decode in decoders.items()}
    for name, decode in decoders.items():  # warm-up: tracing, XLA compilation
        length = generated_tokens(name, decode())
        assert length == OUTPUT_LENGTH, (name, length)
    print("\t".join(decoders), flush=True)
    for name in sys.stdin:
        start = time.perf_counter()
        decoders[name.strip()]()
        print(time.perf_counter() - start, flush=True)


def engine_bleu(model_dir, source, reference, threads):
    """BLEU and sentences/s of t2t-lite-decoder (beam 4) with each engine, one process each."""
    print(f"BLEU of {model_dir} on {source}, beam 4, {threads} threads")
    print("| engine | BLEU | sentences/s |")
    print("| --- | ---: | ---: |")
    decoder = os.path.join(os.path.dirname(sys.executable), "t2t-lite-decoder")
    rows = []
    for engine in ([], ["--engine=ctranslate2"], ["--engine=ctranslate2", "--quantization=int8"]):
        with tempfile.NamedTemporaryFile(suffix=".txt") as output:
            result = subprocess.run(
                [decoder, f"--model_dir={model_dir}", f"--decode_from_file={source}",
                 f"--decode_reference={reference}", f"--decode_to_file={output.name}",
                 "--beam_size=4", *engine], capture_output=True, text=True, check=True,
                env={**os.environ, "OMP_NUM_THREADS": str(threads),
                     "TF_NUM_INTRAOP_THREADS": str(threads),
                     "TF_NUM_INTEROP_THREADS": str(threads)})
        bleu = re.search(r"^BLEU = ([\d.]+)", result.stdout, re.MULTILINE).group(1)
        speed = re.search(r"\(([\d.]+) sentences/s\)", result.stderr).group(1)  # a log line
        print(f"| {' '.join(engine) or '--engine=tensorflow'} | {bleu} | {speed} |", flush=True)
        rows.append([f"`{' '.join(engine) or '--engine=tensorflow'}`", round(float(bleu), 2),
                     round(float(speed), 1)])
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="*", default=["small", "base"], choices=SHAPES)
    parser.add_argument("--beams", nargs="+", type=int, default=[BEAM, 1])
    parser.add_argument("--frameworks", nargs="+", default=["tf", "ct2", "torch"],
                        choices=["tf", "ct2", "torch"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no_uncached", action="store_true",
                        help="skip the slow uncached decoder")
    parser.add_argument("--checkouts", nargs="+", metavar="NAME=PATH",
                        help="time t2t_lite's TensorFlow engine from each of these checkouts "
                        "instead of --frameworks")
    parser.add_argument("--bleu_model_dir", help="a trained translation model_dir")
    parser.add_argument("--bleu_source", help="its test source sentences, one a line")
    parser.add_argument("--bleu_reference", help="their reference translations")
    record.add_record_flag(parser)  # the speed table: a row per shape and engine
    record.add_record_flag(parser, "--record_kv_cache", "the cached, XLA and uncached t2t_lite "
                           f"decoders at beam {BEAM} (needs the uncached decoder)",
                           "decoding/kv_cache.json")
    record.add_record_flag(parser, "--record_bleu", "the --bleu_model_dir table",
                           "decoding/engines_bleu.json")
    parser.add_argument("--worker", nargs=2, metavar=("FRAMEWORK", "SHAPE"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--label", default="", help=argparse.SUPPRESS)
    parser.add_argument("--checkout", help=argparse.SUPPRESS)
    args = parser.parse_args()
    import decoding_records  # the --record* writers, beside this file
    if args.worker:
        return worker(*args.worker, args.threads, args.beams, not args.no_uncached, args.label,
                      args.checkout)
    if args.record and not args.shapes:
        parser.error("--record writes the speed table: give --shapes")
    if args.record_kv_cache and (not args.shapes or args.no_uncached or BEAM not in args.beams
                                 or not (args.checkouts or "tf" in args.frameworks)):
        parser.error(f"--record_kv_cache needs the uncached decoder: --shapes, beam {BEAM} in "
                     "--beams, tf in --frameworks (or --checkouts), no --no_uncached")
    if args.record_bleu and not args.bleu_model_dir:
        parser.error("--record_bleu needs --bleu_model_dir")
    if args.shapes:
        results = throughput(args)
        if args.record:
            decoding_records.write_engines_record(args, results)
        if args.record_kv_cache:
            decoding_records.write_kv_cache_record(args, results)
    if args.bleu_model_dir:
        rows = engine_bleu(args.bleu_model_dir, args.bleu_source, args.bleu_reference,
                           args.threads)
        if args.record_bleu:
            decoding_records.write_bleu_record(args, rows)
    return None


def throughput(args):
    print(f"batch {BATCH} x {SOURCE_LENGTH} source tokens, beams {args.beams}, {OUTPUT_LENGTH} "
          f"generated tokens, vocab {VOCAB}, {args.threads} threads, median of {args.repeats}")
    print("| shape | decoder | sentences/s | tokens/s | seconds/batch | best seconds/batch |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    results = []  # (shape, checkout name or "", engine, beam, seconds of each run)
    if args.checkouts:
        specs = [("tf", f"{name} ", path)
                 for name, path in checkouts.parse(args.checkouts).items()]
    else:
        specs = [(framework, "", None) for framework in args.frameworks]
    for shape in args.shapes:
        workers, times = {}, {}
        for framework, label, checkout in specs:
            process = subprocess.Popen(
                [sys.executable, __file__, "--worker", framework, shape,
                 f"--threads={args.threads}", "--beams", *map(str, args.beams),
                 f"--label={label}"]
                + (["--no_uncached"] if args.no_uncached else [])
                + ([f"--checkout={checkout}"] if checkout else []),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                env={**checkouts.environment(checkout), "TF_CPP_MIN_LOG_LEVEL": "3"})
            for name in process.stdout.readline().strip().split("\t"):
                workers[name], times[name] = process, []
                engine, beam = name[len(label):].rsplit(" beam ", 1)
                results.append((shape, label.strip(), engine, int(beam), times[name]))
        for repeat in range(args.repeats):
            for name, process in workers.items():
                if repeat and "uncached" in name:
                    continue  # once is enough to show how slow it is
                process.stdin.write(name + "\n")
                process.stdin.flush()
                times[name].append(float(process.stdout.readline()))
        for process in set(workers.values()):
            process.stdin.close()
            process.wait()
        for name, runs in times.items():
            seconds = statistics.median(runs)
            print(f"| {shape} | {name} | {BATCH / seconds:.1f} | "
                  f"{BATCH * OUTPUT_LENGTH / seconds:.0f} | {seconds:.2f} | {min(runs):.2f} |",
                  flush=True)
    return results


if __name__ == "__main__":
    main()
