"""t2t-lite-decoder: translates a file, or lines typed on stdin, with a trained model_dir."""

import logging
import sys
import time

from t2t_lite import cli
from t2t_lite.cli import translating
from t2t_lite.evaluation.metrics import BLEU_TOKENIZERS
from t2t_lite.utils.errors import UserError

logger = logging.getLogger("t2t_lite")



def parse_args(argv):
    parser = cli.ArgumentParser(prog="t2t-lite-decoder", description=__doc__)
    translating.add_model_flags(parser)
    parser.add_argument("--decode_from_file",
                        help="source text, one sentence a line (default: read stdin "
                        "interactively)")
    parser.add_argument("--decode_to_file", help="translations, one a line, in the order of "
                        "--decode_from_file (default: stdout)")
    parser.add_argument("--decode_reference",
                        help="reference translations: print sacreBLEU and its signature (for "
                        "parsing: gold trees, print EVALB's F1)")
    parser.add_argument("--batch_size", type=int, default=32,
                        help="sentences translated together (sorted by length)")
    add_bleu_tokenize_flag(parser)
    parser.add_argument("--bleu_lowercase", action="store_true",
                        help="case-insensitive BLEU")
    parser.add_argument("--attention_dir", help="write N.png (encoder-decoder attention of "
                        "every layer and head) and N.npz (all attention weights) for line N "
                        "and its translation (needs --decode_from_file and the viz extra)")
    parser.add_argument("--engine", default="tensorflow", choices=("tensorflow", "ctranslate2"),
                        help="ctranslate2: the fastest on CPUs, converted on first use and "
                        "cached in MODEL_DIR/ctranslate2 (pip install 't2t_lite[ctranslate2]')")
    add_split_and_n_best_flags(parser)
    args = translating.parse_with_quantization(parser, argv, "engine", "ctranslate2")
    if args.batch_size < 1:
        parser.error(f"--batch_size must be positive, got {args.batch_size}")
    if args.decode_reference and not args.decode_from_file:
        parser.error("--decode_reference needs --decode_from_file")
    if args.attention_dir and not args.decode_from_file:
        parser.error("--attention_dir needs --decode_from_file")
    if args.attention_dir and args.engine != "tensorflow":
        parser.error("--attention_dir needs the tensorflow engine (CTranslate2 does not return "
                     "attention weights)")
    check_split_and_n_best_flags(parser, args)
    return args


def add_bleu_tokenize_flag(parser):
    """--bleu_tokenize, shared by the trainer and the decoder."""
    parser.add_argument("--bleu_tokenize", choices=BLEU_TOKENIZERS,
                        help="sacreBLEU's tokenizer (default: the target language's: zh for "
                        "Chinese, ja-mecab for Japanese if installed, else 13a, the WMT "
                        "standard; intl for paper-style comparisons on non-ASCII text)")


def add_split_and_n_best_flags(parser):
    parser.add_argument("--split", choices=("dev", "test"),
                        help="translate this split of the problem's data_dir and score it "
                        "against its references; --decode_to_file=OUT also writes OUT.src, "
                        "OUT.ref and OUT.tsv (source, reference, hypothesis, score)")
    parser.add_argument("--n_best", type=int, default=None, metavar="K",
                        help="write the K best hypotheses of each input, one a line as "
                        "'hypothesis<TAB>score', best first (needs --beam_size >= K)")


def check_split_and_n_best_flags(parser, args):
    if args.split and (args.decode_from_file or args.decode_reference):
        parser.error("--split reads the split's sources and references from the data_dir: "
                     "drop --decode_from_file and --decode_reference")
    if args.n_best is not None and args.n_best < 1:
        parser.error(f"--n_best must be positive, got {args.n_best}")
    if args.n_best and not args.decode_from_file:
        parser.error("--n_best needs --decode_from_file")
    if args.n_best and args.engine != "tensorflow":
        parser.error("--n_best needs the tensorflow engine")


def read_lines(path):
    """The lines of a UTF-8 text file without their line endings; invalid UTF-8 is an error
    naming the line."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror}") from None
    raw_lines = data.split(b"\n")
    if raw_lines[-1] == b"":
        raw_lines.pop()
    lines = []
    for number, raw in enumerate(raw_lines, 1):
        try:
            lines.append(raw.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError as error:
            raise UserError(
                f"{path} line {number} is not valid UTF-8 (byte {error.start}: {error.reason}); "
                "convert the file to UTF-8, e.g. with iconv") from None
    return lines


def encode_lines(translator, lines, source, first_number=1):
    """Token ids of each line, warning about lines the model will see only the start of."""
    token_lists = []
    for number, line in enumerate(lines, first_number):
        try:
            tokens = translator.vocabulary.encode(line)
        except UserError as error:
            raise UserError(f"{source} line {number}: {error}") from None
        if translator.is_truncated(tokens):
            logger.warning("%s line %d has %d tokens: only its first %d are translated "
                           "(max_length=%d)", source, number, len(tokens),
                           translator.max_input_tokens, translator.hparams.max_length)
        token_lists.append(tokens)
    return token_lists


def read_sources_and_references(args, problem):
    sources = read_lines(args.decode_from_file)
    references, unit = None, "lines"
    if args.decode_reference:
        references, unit = problem.read_references(args.decode_reference), "references"
        if references is None:
            references, unit = read_lines(args.decode_reference), "lines"
    if references is not None and len(references) != len(sources):
        raise UserError(f"{args.decode_reference} has {len(references)} {unit} but "
                        f"{args.decode_from_file} has {len(sources)}: they must be parallel")
    return sources, references


def decode_file(runner, translator, sources, references, args):
    from t2t_lite.evaluation.metrics import bleu
    from t2t_lite.utils.files import write_text_atomically

    problem = runner.problem
    token_lists = encode_lines(translator, sources, args.decode_from_file)
    start = time.perf_counter()
    if args.n_best:
        n_best = [[translation._replace(text=problem.postprocess(source, translation.text))
                   for translation in translations]
                  for source, translations in zip(sources,
                                                  translator.translate_n_best(token_lists,
                                                                              args.n_best))]
        hypotheses = [translations[0].text for translations in n_best]
    else:
        hypotheses = [problem.postprocess(source, t.text) for source, t in
                      zip(sources, translator.translate_tokens(token_lists))]
    elapsed = time.perf_counter() - start
    logger.info("translated %d lines in %.1f s (%.1f sentences/s)", len(sources), elapsed,
                len(sources) / max(elapsed, 1e-9))
    output = (format_n_best(n_best) if args.n_best
              else "".join(f"{text}\n" for text in hypotheses))
    if args.decode_to_file:
        write_text_atomically(args.decode_to_file, output)
        logger.info("wrote %s", args.decode_to_file)
    else:
        sys.stdout.write(output)
    if args.attention_dir:
        write_attention(translator, token_lists, hypotheses, args.attention_dir)
    if references is not None:
        report = problem.reference_report(hypotheses, references)
        if report is not None:
            print(report)
            return report
        score, signature = bleu(hypotheses, references, bleu_tokenizer(runner, args),
                                args.bleu_lowercase)
        print(f"{score}  {signature}")
        return score.score
    return None


def write_attention(translator, token_lists, hypotheses, directory):
    from t2t_lite.decoding.attention import attention_weights
    from t2t_lite.decoding.attention_plot import save_attention

    target_tokens = [translator.vocabulary.encode(text) for text in hypotheses]
    save_attention(attention_weights(translator, token_lists, target_tokens), directory)
    logger.info("wrote the attention of %d lines to %s", len(hypotheses), directory)


def decode_interactively(translator, problem):
    """Translates each line of stdin as soon as it is typed. Every line gives exactly one
    output line, so a pipe stays aligned: a line that cannot be translated gives an empty one
    and a warning on stderr naming it."""
    prompt = sys.stdin.isatty()
    number = 0
    while True:
        if prompt:
            print("> ", end="", file=sys.stderr, flush=True)
        raw = sys.stdin.buffer.readline()
        if not raw:
            return
        number += 1
        try:
            line = raw.rstrip(b"\r\n").decode("utf-8")
            tokens = encode_lines(translator, [line], "stdin", number)[0]
        except UnicodeDecodeError as error:
            logger.warning("stdin line %d is not valid UTF-8 (%s): its output line is empty",
                           number, error.reason)
            print(flush=True)
            continue
        except UserError as error:
            logger.warning("%s: its output line is empty", error)
            print(flush=True)
            continue
        print(problem.postprocess(line, translator.translate_tokens([tokens])[0].text),
              flush=True)


def main(argv):
    args = parse_args(argv)
    runner = translating.runner_from_flags(args)
    if args.decode_from_file:  # read before loading the model, so that mistakes show at once
        sources, references = read_sources_and_references(args, runner.problem)
    if args.attention_dir:
        from t2t_lite.decoding.attention_plot import require_matplotlib

        require_matplotlib()
    _, translator = translating.translator_from_flags(args, args.batch_size, args.engine,
                                                      args.quantization or "float32", runner)
    if args.split:
        return score_split(runner, translator, args)
    if args.decode_from_file:
        return decode_file(runner, translator, sources, references, args)
    decode_interactively(translator, runner.problem)
    return None


def bleu_tokenizer(runner, args):
    """--bleu_tokenize, or the problem's (its target language's), or 13a."""
    chosen = getattr(runner.problem, "bleu_tokenizer", None)
    return args.bleu_tokenize or (chosen() if chosen else "13a")


def format_n_best(n_best):
    """'hypothesis<TAB>score' lines, the n best of each input together, best first."""
    return "".join(f"{t.text}\t{t.score:.6f}\n" for translations in n_best
                   for t in translations)


def score_split(runner, translator, args):
    """Translates all of --split and prints the problem's metrics against its references;
    returns the metrics."""
    from t2t_lite.evaluation.evaluator import Evaluator, format_metrics

    if args.bleu_tokenize:
        runner.use_bleu_tokenizer(args.bleu_tokenize)
    evaluator = Evaluator(runner, translator, split=args.split, decode_examples=None)
    start = time.perf_counter()
    metrics = evaluator.evaluate()
    decoded = evaluator.decoded
    logger.info("translated %d lines in %.1f s", len(decoded.sources),
                time.perf_counter() - start)
    if args.decode_to_file:
        write_split_files(args.decode_to_file, decoded)
    else:
        sys.stdout.write("".join(f"{text}\n" for text in decoded.hypotheses))
    note = f", sacreBLEU tokenize={bleu_tokenizer(runner, args)}" if "bleu" in metrics else ""
    print(f"{args.split} ({evaluator.sample.description}, {evaluator.search_name()}{note}): "
          f"{format_metrics(metrics)}")
    return metrics


def write_split_files(path, decoded):
    """Hypotheses to path, sources to path.src, references to path.ref, all side by side in
    path.tsv with the model's scores."""
    import csv
    import io

    from t2t_lite.utils.files import write_text_atomically

    table = io.StringIO()
    writer = csv.writer(table, dialect="excel-tab", lineterminator="\n")
    writer.writerow(["source", "reference", "hypothesis", "score"])
    writer.writerows(zip(decoded.sources, decoded.references, decoded.hypotheses,
                         (f"{score:.6f}" for score in decoded.scores)))
    for name, text in ((path + ".src", "".join(f"{s}\n" for s in decoded.sources)),
                       (path + ".ref", "".join(f"{r}\n" for r in decoded.references)),
                       (path + ".tsv", table.getvalue()),
                       (path, "".join(f"{h}\n" for h in decoded.hypotheses))):
        write_text_atomically(name, text)
    logger.info("wrote %s and its .src, .ref and .tsv", path)


def run():
    cli.run(main)
