"""t2t-lite-decoder: translates a file, or lines typed on stdin, with a trained model_dir."""

import logging
import sys
import time

from t2t_lite import cli
from t2t_lite.cli import translating
from t2t_lite.errors import UserError

logger = logging.getLogger("t2t_lite")

BLEU_TOKENIZERS = ("13a", "intl", "none", "char", "zh", "ja-mecab", "ko-mecab", "flores101",
                   "flores200")


def parse_args(argv):
    parser = cli.ArgumentParser(prog="t2t-lite-decoder", description=__doc__)
    translating.add_model_flags(parser)
    parser.add_argument("--decode_from_file",
                        help="source text, one sentence a line (default: read stdin "
                        "interactively)")
    parser.add_argument("--decode_to_file", help="translations, one a line, in the order of "
                        "--decode_from_file (default: stdout)")
    parser.add_argument("--decode_reference",
                        help="reference translations: print sacreBLEU and its signature")
    parser.add_argument("--batch_size", type=int, default=32,
                        help="sentences translated together (sorted by length)")
    parser.add_argument("--bleu_tokenize", default="13a", choices=BLEU_TOKENIZERS,
                        help="sacreBLEU's tokenizer (13a, the WMT standard; intl for "
                        "paper-style comparisons on non-ASCII text)")
    parser.add_argument("--bleu_lowercase", action="store_true",
                        help="case-insensitive BLEU")
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error(f"--batch_size must be positive, got {args.batch_size}")
    if args.decode_reference and not args.decode_from_file:
        parser.error("--decode_reference needs --decode_from_file")
    return args


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


def read_sources_and_references(args):
    sources = read_lines(args.decode_from_file)
    references = read_lines(args.decode_reference) if args.decode_reference else None
    if references is not None and len(references) != len(sources):
        raise UserError(f"{args.decode_reference} has {len(references)} lines but "
                        f"{args.decode_from_file} has {len(sources)}: they must be parallel")
    return sources, references


def decode_file(translator, sources, references, args):
    from t2t_lite.files import write_text_atomically
    from t2t_lite.metrics import bleu

    token_lists = encode_lines(translator, sources, args.decode_from_file)
    start = time.perf_counter()
    hypotheses = [t.text for t in translator.translate_tokens(token_lists)]
    elapsed = time.perf_counter() - start
    logger.info("translated %d lines in %.1f s (%.1f sentences/s)", len(sources), elapsed,
                len(sources) / max(elapsed, 1e-9))
    output = "".join(f"{text}\n" for text in hypotheses)
    if args.decode_to_file:
        write_text_atomically(args.decode_to_file, output)
        logger.info("wrote %s", args.decode_to_file)
    else:
        sys.stdout.write(output)
    if references is not None:
        score, signature = bleu(hypotheses, references, args.bleu_tokenize, args.bleu_lowercase)
        print(f"{score}  {signature}")
        return score.score
    return None


def decode_interactively(translator):
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
        print(translator.translate_tokens([tokens])[0].text, flush=True)


def main(argv):
    args = parse_args(argv)
    if args.decode_from_file:  # read before loading the model, so that mistakes show at once
        sources, references = read_sources_and_references(args)
    _, translator = translating.translator_from_flags(args, args.batch_size)
    if args.decode_from_file:
        return decode_file(translator, sources, references, args)
    decode_interactively(translator)
    return None


def run():
    cli.run(main)
