"""Flags shared by several commands: those of a trained model_dir (decoder, exporter) and
--bleu_tokenize (trainer, decoder)."""

from t2t_lite import cli
from t2t_lite.config import HParams
from t2t_lite.evaluation.metrics import BLEU_TOKENIZERS


def add_bleu_tokenize_flag(parser):
    parser.add_argument("--bleu_tokenize", choices=BLEU_TOKENIZERS,
                        help="sacreBLEU's tokenizer (default: the target language's: zh for "
                        "Chinese, ja-mecab for Japanese if installed, else 13a, the WMT "
                        "standard; intl for paper-style comparisons on non-ASCII text)")


def add_model_flags(parser, ensemble=False):
    """The flags of a trained model_dir; with `ensemble`, --model_dir may name several."""
    if ensemble:
        parser.add_argument("--model_dir", required=True, nargs="+", metavar="MODEL_DIR",
                            help="a trained model_dir (its problem, hparams and vocabulary are "
                            "used), or several with one vocabulary: an ensemble, which averages "
                            "their log-probabilities at each step (the first one's settings)")
    else:
        parser.add_argument("--model_dir", required=True, help="a trained model_dir (its "
                            "problem, hparams and vocabulary are used)")
    parser.add_argument("--checkpoint_path", nargs="+" if ensemble else None,
                        help="a checkpoint (e.g. MODEL_DIR/ckpt-5000) or a directory of them "
                        "(default: the latest in --model_dir)" + (
                            "; with several --model_dir, one for each, in their order"
                            if ensemble else ""))
    parser.add_argument("--data_dir", help="where the vocabulary now lives (default: the one "
                        "the model_dir was trained with)")
    parser.add_argument("--beam_size", type=int, help="1: greedy (default: the hparams' value, "
                        "4 for the paper's models)")
    parser.add_argument("--alpha", type=float,
                        help="length penalty ((5 + length) / 6) ** alpha (default: hparams, 0.6)")
    parser.add_argument("--extra_length", type=int,
                        help="outputs have at most input length + this many tokens "
                        "(default: hparams, 50)")
    parser.add_argument("--min_length", type=int,
                        help="outputs have at least this many tokens before EOS, if their limit "
                        "allows (default: hparams, 1: never empty; 0: no minimum)")
    parser.add_usr_dir_flag("the problem the model was trained on")


def add_quantization_flag(parser, flag, value):
    """--quantization, which only --FLAG=VALUE (choosing CTranslate2) uses."""
    parser.add_argument("--quantization", help=f"with --{flag}={value}: float32 (default), "
                        "int8 or int8_float32 (int8 weights: 4x smaller, usually faster, nearly "
                        "the same outputs)")


def parse_with_quantization(parser, argv, flag, value):
    """Parses the flags of a parser given add_model_flags and add_quantization_flag(parser,
    FLAG, VALUE): --quantization needs --FLAG=VALUE, and the decoding flags are checked here
    against their hparams' ranges."""
    args = parser.parse_args(argv)
    if args.quantization and getattr(args, flag) != value:
        parser.error(f"--quantization needs --{flag}={value}")
    for name, given in decoding_flags(args).items():
        wrong = given is not None and HParams.out_of_range(name, given)
        if wrong:  # before the model loads; the hparam's own range, e.g. --alpha=nan
            parser.error(f"--{name} {wrong}, got {given}")
    return args


def decoding_flags(args):
    """The decoding hparams the flags change (None keeps the model_dir's)."""
    return {"beam_size": args.beam_size, "alpha": args.alpha, "extra_length": args.extra_length,
            "min_length": args.min_length}


def runner_from_flags(args):
    """The Runner of --model_dir (its problem and hparams; no model loaded)."""
    return runners_from_flags(args)[0]


def runners_from_flags(args):
    """The Runner of each --model_dir (one, unless add_model_flags allowed an ensemble)."""
    from t2t_lite.runner import Runner

    cli.import_usr_dir(args)
    model_dirs = args.model_dir if isinstance(args.model_dir, list) else [args.model_dir]
    return [Runner.from_model_dir(model_dir, args.data_dir) for model_dir in model_dirs]
