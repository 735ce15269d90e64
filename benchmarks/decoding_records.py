"""decoding.py's tables as results records (`--record`, `--record_kv_cache`, `--record_bleu`;
benchmarks/record.py writes them, docs/results_pages.py shows them): kept apart so that the
benchmark itself stays short."""

import statistics

import record
from decoding import BATCH, BEAM, OUTPUT_LENGTH, SHAPES, SOURCE_LENGTH, VOCAB


# The records' names of the engines (the speed table's) and of the decoders (the cache's).
ENGINES = {"t2t_lite": "t2t_lite TensorFlow", "t2t_lite XLA": "t2t_lite TensorFlow, XLA",
           "CTranslate2 float32": "CTranslate2 float32", "CTranslate2 int8": "CTranslate2 int8",
           "HF transformers": "HF transformers MarianMT"}
CACHE_DECODERS = {"t2t_lite": "t2t_lite (tf.function)",
                  "t2t_lite XLA": "t2t_lite XLA (`jit_compile=True`)",
                  "t2t_lite uncached": "t2t_lite uncached (full decoder re-run per token)"}


def workload_notes(args, beams, precision="float32 except the int8 rows"):
    shapes = "; ".join(f"{shape}: d_model {SHAPES[shape]['d_model']}, "
                       f"{SHAPES[shape]['num_encoder_layers']}+"
                       f"{SHAPES[shape]['num_decoder_layers']} layers, d_ff "
                       f"{SHAPES[shape]['d_ff']}, {SHAPES[shape]['num_heads']} heads"
                       for shape in args.shapes)
    return [f"Batch {BATCH} x {SOURCE_LENGTH} source tokens ({SOURCE_LENGTH - 1} + EOS), {beams}, "
            f"length penalty alpha 0.6, exactly {OUTPUT_LENGTH} generated tokens (EOS masked), "
            f"vocabulary {VOCAB:,}, {precision}", shapes[:1].upper() + shapes[1:],
            f"Each engine in its own worker process, {args.threads} threads each; one warm-up "
            f"run (tracing, XLA compilation), then {args.repeats} timed runs interleaved across "
            "the engines; median"]


def labelled(checkout, name):
    return f"{checkout}: {name}" if checkout else name


def write_engines_record(args, results):
    """The speed table: sentences/s (median) of each shape and engine, a column per beam."""
    rows = {}
    for shape, checkout, engine, beam, runs in results:
        if engine in ENGINES:  # not the uncached decoder: see --record_kv_cache
            row = rows.setdefault((shape, checkout, engine), {})
            row[beam] = round(BATCH / statistics.median(runs), 1)
    record.write_record(
        args.record, f"Decoding throughput of the engines, random weights, batch {BATCH} x "
        f"{SOURCE_LENGTH} tokens",
        ["shape", "engine"] + [{"name": f"beam {beam}{' (greedy)' if beam == 1 else ''} "
                                        "sentences/s", "digits": 1} for beam in args.beams],
        [[shape, labelled(checkout, ENGINES[engine])] + [row.get(beam) for beam in args.beams]
         for (shape, checkout, engine), row in rows.items()],
        notes=workload_notes(args, "beams " + ", ".join(map(str, args.beams))) + [
            "CTranslate2: t2t_lite's own model converted by t2t_lite.export.ctranslate2, "
            "searched as the engine searches (no CTranslate2 length penalty, "
            "num_hypotheses=beam, the best by GNMT's penalty picked in Python, inside the "
            "timing)"])


def write_kv_cache_record(args, results):
    """t2t_lite's search with the key/value cache, with XLA and without the cache, at BEAM."""
    rows = []
    for shape, checkout, engine, beam, runs in results:
        if engine in CACHE_DECODERS and beam == BEAM:
            seconds = statistics.median(runs)
            rows.append([shape, labelled(checkout, CACHE_DECODERS[engine]),
                         round(BATCH / seconds, 1), round(BATCH * OUTPUT_LENGTH / seconds),
                         round(seconds, 2), round(min(runs), 2)])
    record.write_record(
        args.record_kv_cache, f"Beam search with and without the key/value cache, and with XLA, "
        f"random weights, batch {BATCH} x {SOURCE_LENGTH} tokens, beam {BEAM}",
        ["shape", "decoder", {"name": "sentences/s", "digits": 1}, "tokens/s",
         {"name": "seconds/batch (median)", "digits": 2},
         {"name": "best seconds/batch", "digits": 2}], rows,
        notes=workload_notes(args, f"beam {BEAM}", "float32") + [
            "Uncached: the same search with the whole decoder recomputed over all previous "
            "tokens at every step (tests/reference_decoding.py), timed once: its median and "
            "best are that one run"])


def write_bleu_record(args, rows):
    with open(args.bleu_source, encoding="utf-8") as f:
        lines = sum(1 for _ in f)
    record.write_record(
        args.record_bleu, f"BLEU and speed of t2t_lite's engines on {args.bleu_model_dir}, "
        "beam 4", ["engine", {"name": "BLEU", "digits": 2},
                   {"name": "sentences/s", "digits": 1}], rows,
        notes=[f"{lines} lines of {args.bleu_source} against {args.bleu_reference}, beam 4, "
               f"{args.threads} threads; BLEU as t2t-lite-decoder's --decode_reference reports it",
               "Sentences/s: the decoder's own count over the file, loading and first-batch "
               "tracing included; not comparable with the engines' throughput table"])
