"""t2t-lite-trainer: trains (or resumes) a model on a problem, evaluating as it goes."""

from t2t_lite import cli
from t2t_lite.cli import decoder


def parse_args(argv):
    parser = cli.ArgumentParser(prog="t2t-lite-trainer", description=__doc__)
    parser.add_argument("--problem", help="registered problem name, e.g. algorithmic_reverse, "
                        "or your own corpus made by t2t-lite-datagen in --data_dir")
    parser.add_argument("--hparams_set", help="registered hparams set, e.g. transformer_base")
    parser.add_argument("--hparams", default="",
                        help='overrides, e.g. "num_heads=16,dropout=0.3"')
    parser.add_argument("--model_dir", help="checkpoints, summaries, hparams.json")
    parser.add_argument("--data_dir", help="TFRecord shards and vocabulary (default: "
                        "MODEL_DIR/data)")
    parser.add_argument("--raw_dir", "--tmp_dir", dest="raw_dir",
                        help="downloads and raw files (default: DATA_DIR/raw)")
    parser.add_argument("--generate_data", action="store_true",
                        help="run datagen first when the data is missing")
    parser.add_argument("--train_steps", type=int, default=100_000,
                        help="total optimizer updates (a resumed run continues to this)")
    parser.add_argument("--eval_every", type=int, default=1000,
                        help="evaluate on dev every N updates (0: only at the end)")
    parser.add_argument("--save_every", type=int, default=None,
                        help="checkpoint every N updates (default: --eval_every)")
    parser.add_argument("--eval_steps", type=int, default=None,
                        help="dev batches per evaluation (default: all)")
    parser.add_argument("--eval_decode_examples", type=int, default=None, metavar="N",
                        help="decode the whole dev set for the problem's metrics (e.g. BLEU "
                        "and chrF) if it has at most N examples, else a fixed random sample "
                        "of N in the file's order (default 3000; 0: none)")
    parser.add_argument("--eval_decode_every", type=int, default=None,
                        help="decode at every evaluation that is a multiple of N updates "
                        "(default: at every evaluation); a multiple of --eval_every")
    parser.add_argument("--eval_beam_size", type=int, default=1,
                        help="1: greedy decoding; more: beam search with the hparams' alpha "
                        "and extra_length")
    parser.add_argument("--keep_best_by",
                        help="keep the checkpoint with the best value of this evaluation "
                        "metric (e.g. bleu, sequence_accuracy, loss) as MODEL_DIR/best")
    decoder.add_bleu_tokenize_flag(parser)
    add_early_stopping_and_averaging_flags(parser)
    parser.add_argument("--keep_checkpoints", type=int, default=20)
    parser.add_argument("--log_every", type=int, default=100)
    parser.add_argument("--strategy", default="auto",
                        choices=("auto", "default", "mirrored", "multi_worker"),
                        help="auto: multi_worker with TF_CONFIG, mirrored with several GPUs")
    parser.add_argument("--jit_compile", action="store_true",
                        help="compile each forward and backward pass with XLA (see "
                        "benchmarks/RESULTS.md for when it pays)")
    parser.add_argument("--random_seed", type=int, default=None,
                        help="make initialization, dropout and the data order repeatable")
    parser.add_argument("--usr_dir", help="a Python module or package registering problems "
                        "or hparams sets")
    parser.add_argument("--registry_help", action="store_true",
                        help="list the registered problems and hparams sets, then exit")
    args = parser.parse_args(argv)
    if not args.registry_help and not args.model_dir:
        parser.error("--model_dir is required")
    for flag in ("train_steps", "eval_every", "save_every", "eval_steps", "keep_checkpoints",
                 "log_every", "eval_decode_examples", "eval_decode_every", "eval_beam_size",
                 "early_stopping", "average_last", "average_best"):
        value = getattr(args, flag)
        if value is not None and value < (0 if flag in ("eval_every", "eval_decode_examples",
                                                        "early_stopping", "average_last",
                                                        "average_best") else 1):
            parser.error(f"--{flag} must be positive, got {value}")
    if args.eval_decode_every and args.eval_every and args.eval_decode_every % args.eval_every:
        parser.error(f"--eval_decode_every={args.eval_decode_every} must be a multiple of "
                     f"--eval_every={args.eval_every}")
    if args.early_stopping_min_delta < 0:
        parser.error("--early_stopping_min_delta must not be negative, got "
                     f"{args.early_stopping_min_delta}")
    return args


def add_early_stopping_and_averaging_flags(parser):
    parser.add_argument("--early_stopping", type=int, default=0, metavar="N",
                        help="stop after N evaluations without improvement of the "
                        "--keep_best_by metric (0: never)")
    parser.add_argument("--early_stopping_min_delta", type=float, default=0.0,
                        metavar="DELTA",
                        help="what counts as an improvement for --early_stopping: more than "
                        "this (default 0)")
    averaging = parser.add_mutually_exclusive_group()
    averaging.add_argument("--average_last", type=int, default=0, metavar="N",
                           help="at the end, average the last N checkpoints into the "
                           "model_dir MODEL_DIR/avg and report its dev metrics")
    averaging.add_argument("--average_best", type=int, default=0, metavar="N",
                           help="the same with the N best checkpoints by --keep_best_by")


def main(argv):
    args = parse_args(argv)
    import tensorflow as tf

    from t2t_lite import registry
    from t2t_lite.evaluation.evaluator import DECODE_EXAMPLES, format_metrics
    from t2t_lite.runner import Runner
    from t2t_lite.training.checkpoints import checkpoint_step
    from t2t_lite.training.trainer import create_strategy

    if args.usr_dir:
        registry.import_usr_dir(args.usr_dir)
    if args.registry_help:
        print(registry.help_string(), end="")
        return
    strategy = create_strategy(args.strategy)
    runner = Runner.create_or_resume(args.model_dir, args.problem, args.hparams_set,
                                     args.hparams, args.data_dir)
    runner.prepare_data(generate=args.generate_data, raw_dir=args.raw_dir, strategy=strategy)
    if args.bleu_tokenize:
        runner.use_bleu_tokenizer(args.bleu_tokenize)
    metrics = runner.train(
        args.train_steps, strategy=strategy, jit_compile=args.jit_compile,
        seed=args.random_seed, eval_every=args.eval_every,
        save_every=args.save_every, eval_steps=args.eval_steps,
        decode_examples=(DECODE_EXAMPLES if args.eval_decode_examples is None
                         else args.eval_decode_examples), decode_every=args.eval_decode_every,
        beam_size=args.eval_beam_size, keep_best_by=args.keep_best_by,
        early_stopping=args.early_stopping, min_delta=args.early_stopping_min_delta,
        average_last=args.average_last, average_best=args.average_best,
        keep_checkpoints=args.keep_checkpoints,
        log_every=args.log_every)
    step = checkpoint_step(tf.train.latest_checkpoint(runner.model_dir))
    print(f"final evaluation at step {step}: {format_metrics(metrics)}")
    return metrics


def run():
    cli.run(main)
