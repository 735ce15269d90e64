"""t2t-lite-trainer: trains (or resumes) a model on a problem, evaluating as it goes."""

import dataclasses
import os

from t2t_lite import cli
from t2t_lite.cli import flags
from t2t_lite.config import TrainConfig
from t2t_lite.utils.errors import UserError

DEFAULTS = {field.name: field.default for field in dataclasses.fields(TrainConfig)}


def build_parser():
    """The trainer's flags, apart from parsing, so that the documentation's reference is
    generated from them (docs/reference_pages.py) rather than typed."""
    parser = cli.ArgumentParser(prog="t2t-lite-trainer", description=__doc__)
    parser.add_argument("--problem", help="registered problem name, e.g. algorithmic_reverse, "
                        "or your own corpus made by t2t-lite-datagen in --data_dir")
    parser.add_argument("--hparams_set", help="registered hparams set, e.g. transformer_base")
    parser.add_argument("--hparams", default="",
                        help='overrides, e.g. "num_heads=16,dropout=0.3"')
    parser.add_argument("--model_dir", help="checkpoints, TensorBoard summaries (train/, eval/), "
                        "hparams.json, problem.json")
    parser.add_argument("--data_dir", help="TFRecord shards and vocabulary (default: "
                        "MODEL_DIR/data)")
    parser.add_argument("--raw_dir", "--tmp_dir", dest="raw_dir",
                        help="downloads and raw files (default: DATA_DIR/raw)")
    parser.add_argument("--generate_data", action="store_true",
                        help="run datagen first when the data is missing")
    start = parser.add_argument_group(
        "starting from another model (fine-tuning)",
        "a new --model_dir takes the weights of another model; its architecture, and its "
        "problem, hparams set and data_dir unless given, come from that model")
    start.add_argument("--init_from", metavar="MODEL_DIR_OR_CHECKPOINT",
                       help="a trained model_dir (its latest checkpoint), its best/ or avg/, "
                       "or one checkpoint MODEL_DIR/ckpt-N; pieces the new vocabulary shares "
                       "with it keep their embeddings; the optimizer and step start afresh")
    start.add_argument("--init_from_optimizer", action="store_true",
                       help="carry Adam's state and the step over too (same vocabulary only); "
                       "--train_steps then counts the source's updates")
    # The flags of TrainConfig: its fields, which check them.
    config = parser.add_argument_group("training, evaluation and checkpoints")
    config.add_argument("--train_steps", type=int,
                        help="total optimizer updates (a resumed run continues to this; "
                        f"default {DEFAULTS['train_steps']})")
    config.add_argument("--train_minutes", type=float, metavar="N",
                        help="a wall-clock budget for this run: stop at the first update after "
                        "N minutes of training (evaluations included) with a checkpoint, then "
                        "evaluate, keep the best and average as at --train_steps; run again to "
                        "go on")
    config.add_argument("--eval_every", type=int,
                        help=f"evaluate on dev every N updates (default {DEFAULTS['eval_every']}"
                        "; 0: only at the end)")
    config.add_argument("--save_every", type=int,
                        help="checkpoint every N updates (default: --eval_every)")
    config.add_argument("--eval_steps", type=int, help="dev batches per evaluation (default: all)")
    config.add_argument("--eval_decode_examples", type=int, metavar="N",
                        help="decode the whole dev set for the problem's metrics (e.g. BLEU "
                        "and chrF) if it has at most N examples, else a fixed random sample "
                        f"of N in the file's order (default {DEFAULTS['eval_decode_examples']}"
                        "; 0: none)")
    config.add_argument("--eval_decode_every", type=int,
                        help="decode at every evaluation that is a multiple of N updates, and "
                        "at the end (default: at every evaluation); a multiple of --eval_every")
    config.add_argument("--eval_beam_size", type=int,
                        help="1 (default): greedy decoding; more: beam search with the hparams' "
                        "alpha and extra_length")
    config.add_argument("--keep_best_by",
                        help="keep the checkpoint with the best value of this evaluation "
                        "metric (e.g. bleu, sequence_accuracy, loss) as MODEL_DIR/best")
    flags.add_bleu_tokenize_flag(config)
    config.add_argument("--early_stopping", type=int, metavar="N",
                        help="stop after N evaluations without improvement of the "
                        "--keep_best_by metric (default 0: never)")
    config.add_argument("--early_stopping_min_delta", type=float, metavar="DELTA",
                        help="what counts as an improvement for --early_stopping: more than "
                        "this (default 0)")
    config.add_argument("--average_last", type=int, metavar="N",
                        help="at the end, average the last N checkpoints into the "
                        "model_dir MODEL_DIR/avg and report its dev metrics")
    config.add_argument("--average_best", type=int, metavar="N",
                        help="the same with the N best checkpoints by --keep_best_by")
    config.add_argument("--keep_checkpoints", type=int,
                        help=f"checkpoints kept (default {DEFAULTS['keep_checkpoints']})")
    config.add_argument("--log_every", type=int,
                        help=f"progress line every N updates (default {DEFAULTS['log_every']})")
    config.add_argument("--jit_compile", action="store_true", default=None,
                        help="compile each forward and backward pass with XLA (see "
                        "benchmarks/RESULTS.md for when it pays)")
    config.add_argument("--random_seed", type=int,
                        help="make initialization, dropout and the data order repeatable")
    parser.add_argument("--strategy", default="auto",
                        choices=("auto", "default", "mirrored", "multi_worker"),
                        help="auto: multi_worker with TF_CONFIG, mirrored with several GPUs, "
                        "else default (one device); on JAX: keras.distribution.DataParallel "
                        "over the local devices, or multi_worker (jax.distributed) where a "
                        "cluster is named (the flags below, KERAS_DISTRIBUTION_*, Cloud TPU, "
                        "Slurm)")
    cluster = parser.add_argument_group("several processes on JAX (jax.distributed)")
    cluster.add_argument("--coordinator_address", metavar="HOST:PORT",
                         help="process 0's address, the same on every process "
                         "(KERAS_DISTRIBUTION_JOB_ADDRESSES)")
    cluster.add_argument("--num_processes", type=int, metavar="N",
                         help="processes in all (KERAS_DISTRIBUTION_NUM_PROCESSES)")
    cluster.add_argument("--process_id", type=int, metavar="I",
                         help="this process's index, 0 to N-1; 0 writes the model_dir "
                         "(KERAS_DISTRIBUTION_PROCESS_ID)")
    parser.add_usr_dir_flag()
    parser.add_argument("--registry_help", action="store_true",
                        help="list the registered problems and hparams sets, then exit")
    return parser


def parse_args(argv):
    """The flags of argv, with the checks that need several of them."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.registry_help and not args.model_dir:
        parser.error("--model_dir is required")
    if args.init_from_optimizer and not args.init_from:
        parser.error("--init_from_optimizer needs --init_from")
    return args


def train_config(args):
    """The TrainConfig of the flags (checked as it is made)."""
    return TrainConfig(**{name: getattr(args, name) for name in DEFAULTS
                          if getattr(args, name) is not None})


def join_cluster(args):
    """Passes the cluster flags to keras.distribution.initialize (by its environment
    variables): JAX's; TensorFlow's workers read TF_CONFIG."""
    from t2t_lite.utils.backend import JAX_CLUSTER_ENVIRONMENT as ENVIRONMENT
    from t2t_lite.utils.backend import keras_backend

    given = {flag: getattr(args, flag) for flag in ENVIRONMENT if getattr(args, flag) is not None}
    if given and keras_backend() != "jax":
        raise UserError(f"--{next(iter(given))} starts jax.distributed: on TensorFlow, several "
                        "machines read TF_CONFIG (see t2t-lite-make-tf-configs)")
    for flag, value in given.items():
        os.environ[ENVIRONMENT[flag]] = str(value)


def main(argv):
    """Returns the final evaluation's metrics."""
    args = parse_args(argv)
    cli.import_usr_dir(args)
    from t2t_lite import registry

    if args.registry_help:
        print(registry.help_string(), end="")
        return None
    config = train_config(args)

    from t2t_lite import backends
    from t2t_lite.evaluation.evaluator import format_metrics
    from t2t_lite.runner import Runner
    from t2t_lite.training.checkpoint_list import latest_step

    join_cluster(args)
    distribution = backends.current().distribution(args.strategy)
    runner = Runner.create_or_resume(args.model_dir, args.problem, args.hparams_set,
                                     args.hparams, args.data_dir, args.init_from,
                                     args.init_from_optimizer)
    runner.prepare_data(generate=args.generate_data, raw_dir=args.raw_dir,
                        distribution=distribution)
    metrics = runner.train(config, distribution=distribution)
    print(f"final evaluation at step {latest_step(runner.model_dir.path)}: "
          f"{format_metrics(metrics)}")
    return metrics


def run():
    cli.run(main)
