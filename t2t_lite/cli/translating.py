"""Flags shared by the commands that translate with a trained model_dir (decoder, exporter)."""


def add_model_flags(parser):
    parser.add_argument("--model_dir", required=True,
                        help="a trained model_dir (its problem, hparams and vocabulary are used)")
    parser.add_argument("--checkpoint_path",
                        help="a checkpoint (e.g. MODEL_DIR/ckpt-5000) or a directory of them "
                        "(default: the latest in --model_dir)")
    parser.add_argument("--data_dir", help="where the vocabulary now lives (default: the one "
                        "the model_dir was trained with)")
    parser.add_argument("--beam_size", type=int, help="1: greedy (default: the hparams' value, "
                        "4 for the paper's models)")
    parser.add_argument("--alpha", type=float,
                        help="length penalty ((5 + length) / 6) ** alpha (default: hparams, 0.6)")
    parser.add_argument("--extra_length", type=int,
                        help="outputs have at most input length + this many tokens "
                        "(default: hparams, 50)")
    parser.add_argument("--usr_dir", help="a Python module or package registering the problem "
                        "the model was trained on, if it is not built in")


def parse_with_quantization(parser, argv, flag, value):
    """Adds --quantization, which only --FLAG=VALUE (choosing CTranslate2) uses, and parses."""
    parser.add_argument("--quantization", help=f"with --{flag}={value}: float32 (default), "
                        "int8 or int8_float32 (int8 weights: 4x smaller, usually faster, nearly "
                        "the same outputs)")
    args = parser.parse_args(argv)
    if args.quantization and getattr(args, flag) != value:
        parser.error(f"--quantization needs --{flag}={value}")
    return args


def runner_from_flags(args):
    """The Runner of --model_dir (its problem and hparams; no model loaded)."""
    from t2t_lite import registry
    from t2t_lite.runner import Runner

    if args.usr_dir:
        registry.import_usr_dir(args.usr_dir)
    return Runner.from_model_dir(args.model_dir, args.data_dir)


def translator_from_flags(args, batch_size=32, engine="tensorflow", quantization="float32",
                          runner=None):
    """The Runner of --model_dir (or `runner`) and a Translator on its restored checkpoint."""
    runner = runner or runner_from_flags(args)
    translator = runner.translator(checkpoint_path=args.checkpoint_path, batch_size=batch_size,
                                   engine=engine, quantization=quantization,
                                   beam_size=args.beam_size, alpha=args.alpha,
                                   extra_length=args.extra_length)
    return runner, translator
