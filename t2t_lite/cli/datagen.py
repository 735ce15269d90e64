"""t2t-lite-datagen: writes a problem's vocabulary and TFRecord shards to a data_dir.

A registered problem (e.g. translate_ende_wmt32k) is downloaded through tensorflow-datasets; a
new name with --files_dir or --train/--dev/--test makes a problem of the user's own parallel
files (or, with --task=parsing, treebank files), which later commands find in the data_dir.
"""

import logging

from t2t_lite import cli

# Flags of the user's own corpus: where its files are, and how to read and encode them.
FILE_FLAGS = ("files_dir", "train", "dev", "test")
SETTING_FLAGS = ("source_lang", "target_lang", "vocab_size", "vocab_type", "vocab_from",
                 "bpe_dropout", "bpe_dropout_samples")


def build_parser():
    """The flags, apart from parsing: the documentation's reference is generated from them."""
    parser = cli.ArgumentParser(prog="t2t-lite-datagen", description=__doc__)
    parser.add_argument("--problem", required=True,
                        help="a registered problem, or a new name for your own corpus")
    parser.add_argument("--data_dir", required=True, help="where the shards and vocabulary go")
    parser.add_argument("--raw_dir", "--tmp_dir", dest="raw_dir",
                        help="downloads and raw files (default: DATA_DIR/raw)")
    parser.add_usr_dir_flag("problems")
    own = parser.add_argument_group(
        "your own corpus", "line-aligned files STEM.SOURCE_LANG + STEM.TARGET_LANG, or "
        "STEM.tsv with source<TAB>target lines")
    own.add_argument("--task", choices=("translation", "parsing"), default="translation",
                     help="parsing: --train/--dev/--test are Penn-bracket tree files, "
                     "directories of them or globs (default: translation)")
    own.add_argument("--files_dir", help="a directory with train.*, dev.* (or valid.*, val.*) "
                     "and optionally test.*")
    own.add_argument("--train", help="a TSV file, or the path before .SOURCE_LANG/.TARGET_LANG")
    own.add_argument("--dev", help="as --train, for the dev set")
    own.add_argument("--test", help="as --train, for the test set (optional)")
    own.add_argument("--source_lang", help="suffix of the source files, e.g. en")
    own.add_argument("--target_lang", help="suffix of the target files, e.g. de")
    own.add_argument("--vocab_size", type=int,
                     help="subwords in the shared vocabulary (default 8000; 32000 for "
                     "millions of pairs; on 50k pairs (30 minutes) 4000 scored better into "
                     "Japanese and worse into English, on 10k worse into Japanese and level into "
                     "English; 6000 level with 8000 or a little ahead, 16000 worse (50k) or "
                     "level at best (10k); on 2.5k 2000, 4000 and 8000 level into English, "
                     "4000 a point ahead into Japanese (one seed): compare on dev)")
    own.add_argument("--vocab_type", choices=("bpe", "unigram"),
                     help="SentencePiece model (default bpe)")
    own.add_argument("--vocab_from", metavar="MODEL_DIR",
                     help="encode with the vocabulary of this trained model instead of "
                     "learning one: the data to fine-tune it on (t2t-lite-trainer --init_from)")
    own.add_argument("--bpe_dropout", type=float, metavar="ALPHA",
                     help="BPE-dropout: write each training pair in several random "
                     "segmentations, each merge dropped with probability ALPHA (0.05 gained "
                     "in both directions on 7,000 Japanese-English pairs in 20 minutes; on "
                     "10,000, level in 20 and ahead in 30 in four runs, both directions: see "
                     "the own-corpus guide)")
    own.add_argument("--bpe_dropout_samples", type=int, metavar="K",
                     help="segmentations of each training pair with --bpe_dropout (default 16; "
                     "the training split is K times as large)")
    return parser


def parse_args(argv):
    """The flags of argv, with the checks that need several of them."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.files_dir and (args.train or args.dev or args.test):
        parser.error("pass either --files_dir or --train/--dev/--test, not both")
    if args.vocab_size is not None and args.vocab_size < 1:
        parser.error(f"--vocab_size must be positive, got {args.vocab_size}")
    if args.bpe_dropout is not None and not 0 < args.bpe_dropout < 1:
        parser.error(f"--bpe_dropout is a probability between 0 and 1, got {args.bpe_dropout}")
    if args.bpe_dropout_samples is not None and (args.bpe_dropout is None
                                                 or args.bpe_dropout_samples < 1):
        parser.error("--bpe_dropout_samples is a positive number of segmentations, with "
                     "--bpe_dropout")
    if args.vocab_from and (args.vocab_size or args.vocab_type):
        parser.error("--vocab_from takes the model's vocabulary as it is: drop --vocab_size "
                     "and --vocab_type")
    return args


def main(argv):
    args = parse_args(argv)
    cli.import_usr_dir(args)
    from t2t_lite import registry
    from t2t_lite.utils.errors import UserError
    from t2t_lite.utils.files import absolute

    data_dir = absolute(args.data_dir)
    raw_dir = absolute(args.raw_dir) if args.raw_dir else None
    own_corpus = {flag: getattr(args, flag) for flag in FILE_FLAGS + SETTING_FLAGS
                  if getattr(args, flag) is not None}
    if args.task == "parsing":
        other = sorted(own_corpus.keys() - {"train", "dev", "test", "vocab_size"})
        if other:
            raise UserError(f"--{', --'.join(other)}: not for --task=parsing, which takes "
                            "--train, --dev, --test and --vocab_size")
        problem = registry.problems.get("parsing_files").create(args.problem, data_dir,
                                                                 **own_corpus)
    elif own_corpus.keys() & set(FILE_FLAGS):
        vocabulary = None
        if args.vocab_from:
            vocabulary = model_vocabulary(args.vocab_from)
            own_corpus.update(vocab_from=absolute(args.vocab_from), vocab_size=vocabulary.size,
                              vocab_type=vocabulary.model_type)
        problem = registry.problems.get("translate_files").create(args.problem, data_dir,
                                                                   **own_corpus)
        if vocabulary:
            problem.adopt_vocabulary(data_dir, vocabulary)
    elif own_corpus:
        raise UserError(f"--{', --'.join(own_corpus)}: only for your own corpus, made with "
                        "--files_dir or --train and --dev")
    else:
        problem = registry.problem(args.problem, data_dir)
    problem.generate_data(data_dir, raw_dir)
    logging.getLogger("t2t_lite").info("%s is ready in %s", problem.name, data_dir)


def model_vocabulary(model_dir):
    """The SentencePiece vocabulary of the model in model_dir (--vocab_from)."""
    from t2t_lite.data.vocabulary import SentencePieceVocabulary
    from t2t_lite.runner import Runner
    from t2t_lite.utils.errors import UserError

    vocabulary = Runner.from_model_dir(model_dir).vocabulary
    if type(vocabulary) is not SentencePieceVocabulary:
        raise UserError(f"--vocab_from={model_dir}: its vocabulary is not a translation "
                        "problem's SentencePiece model, which your own corpus needs")
    return vocabulary


def run():
    cli.run(main)
