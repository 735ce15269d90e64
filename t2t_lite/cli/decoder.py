"""t2t-lite-decoder: translates a file, or lines typed on stdin, with a trained model_dir."""

import functools

from t2t_lite import cli
from t2t_lite.cli import flags


def build_parser():
    """The flags, apart from parsing: the documentation's reference is generated from them."""
    from t2t_lite.decoding.scoring import NORMALIZATIONS
    from t2t_lite.export.engines import ENGINE_NAMES

    parser = cli.ArgumentParser(prog="t2t-lite-decoder", description=__doc__)
    flags.add_model_flags(parser, ensemble=True)
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
    flags.add_bleu_tokenize_flag(parser)
    parser.add_argument("--bleu_lowercase", action="store_true",
                        help="case-insensitive BLEU")
    parser.add_argument("--attention_dir", help="write N.png (encoder-decoder attention of "
                        "every layer and head) and N.npz (all attention weights) for input line "
                        "N (of --decode_from_file, or of stdin) and its translation (needs the "
                        "viz extra)")
    parser.add_argument("--engine", choices=ENGINE_NAMES,
                        help="default: Keras's backend (tensorflow, or jax with "
                        "KERAS_BACKEND=jax); ctranslate2: the fastest on CPUs, converted on "
                        "first use and cached in MODEL_DIR/ctranslate2 (pip install "
                        "'t2t_lite[ctranslate2]')")
    parser.add_argument("--split", choices=("dev", "test"),
                        help="translate this split of the problem's data_dir and score it "
                        "against its references; --decode_to_file=OUT also writes OUT.src, "
                        "OUT.ref and OUT.tsv (source, reference, hypothesis, score)")
    parser.add_argument("--n_best", type=int, default=None, metavar="K",
                        help="write the K best hypotheses of each input, one a line as "
                        "'hypothesis<TAB>score', best first (needs --beam_size >= K; with "
                        "sampling, K samples)")
    parser.add_argument("--score", action="store_true",
                        help="score given translations instead of translating (no search): "
                        "--decode_from_file holds source<TAB>target lines, or the sources with "
                        "--score_targets holding their targets; writes a line per pair, "
                        "'score<TAB>token log-probabilities<TAB>error' (score nan and the "
                        "reason for a pair that cannot be scored)")
    parser.add_argument("--score_targets", help="with --score: the targets, one a line, "
                        "parallel to --decode_from_file (for parsing: linearized trees)")
    parser.add_argument("--score_normalize", choices=NORMALIZATIONS,
                        help="with --score: the score is the targets' log-probability (none, "
                        "the default), its mean per token (length), or divided by GNMT's "
                        "penalty with --alpha as beam search scores its outputs (gnmt)")
    parser.add_argument("--with_alignments", action="store_true",
                        help="follow each output with <TAB> and its alignment to the source in "
                        "Pharaoh format, 'i-j' for source token i and output token j (from 0): "
                        "the source token its attention weighs most")
    parser.add_argument("--alignment_layer", type=int, metavar="N",
                        help="with --with_alignments: the decoder layer whose heads (averaged) "
                        "align, from 0, or -1 for the last (default: the penultimate)")
    parser.add_argument("--sampling_topk", type=int, metavar="K",
                        help="draw each token at random instead of searching (back-translation),"
                        " from the K most probable (0, the default when sampling: all); with "
                        "--n_best=N, N samples of each input")
    parser.add_argument("--sampling_topp", type=float, metavar="P",
                        help="sample from the nucleus: the most probable tokens whose "
                        "probabilities first reach P (after --sampling_topk)")
    parser.add_argument("--sampling_temperature", type=float, metavar="T",
                        help="sample from the distribution at temperature T (default 1; towards "
                        "0: greedy, above 1: more varied)")
    parser.add_argument("--random_seed", type=int, help="with sampling: the seed that makes the "
                        "samples repeatable (default: a new one, logged)")
    parser.add_argument("--glossary", metavar="FILE",
                        help="a TSV file of 'source term<TAB>target term' lines: each source "
                        "term found in an input (whole tokens, case-insensitive, longest first) "
                        "puts its target term into the translation (lexically constrained beam "
                        "search); reports term accuracy")
    parser.add_argument("--constraints", action="store_true",
                        help="each input line is 'source<TAB>phrase<TAB>...': its translation "
                        "must contain every phrase (as fairseq's --constraints)")
    flags.add_quantization_flag(parser, "engine", "ctranslate2")
    return parser


def parse_args(argv):
    """The flags of argv, with the checks that need several of them (the engine's
    capabilities among them)."""
    from t2t_lite.export.engines import make_engine, refusal

    parser = build_parser()
    args = flags.parse_with_quantization(parser, argv, "engine", "ctranslate2")
    if args.engine is None:
        from t2t_lite import backends

        args.engine = backends.current().name
    _check_sampling_ensembles_and_alignments(parser, args)
    if (args.score_targets or args.score_normalize) and not args.score:
        parser.error("--score_targets and --score_normalize need --score")
    if args.score and not args.decode_from_file:
        parser.error("--score needs --decode_from_file (source<TAB>target lines, or the sources "
                     "with --score_targets)")
    if args.score and (args.decode_reference or args.n_best or args.attention_dir):
        parser.error("--score writes scores of given targets: drop --decode_reference, "
                     "--n_best and --attention_dir")
    if args.batch_size < 1:
        parser.error(f"--batch_size must be positive, got {args.batch_size}")
    if args.decode_reference and not args.decode_from_file:
        parser.error("--decode_reference needs --decode_from_file")
    if args.attention_dir and not make_engine(args.engine).capabilities.has("attention"):
        parser.error(refusal(args.engine, "attention", "--attention_dir"))
    if args.split and args.attention_dir:
        parser.error("--attention_dir is for the lines of --decode_from_file or stdin: drop it "
                     "or --split")
    if args.split and (args.decode_from_file or args.decode_reference):
        parser.error("--split reads the split's sources and references from the data_dir: "
                     "drop --decode_from_file and --decode_reference")
    _check_target_terms(parser, args)
    if args.n_best is not None and args.n_best < 1:
        parser.error(f"--n_best must be positive, got {args.n_best}")
    if args.n_best and not args.decode_from_file:
        parser.error("--n_best needs --decode_from_file")
    return args


def _check_sampling_ensembles_and_alignments(parser, args):
    """parser.error for the flags of sampling, ensembles and alignments that do not go
    together, or with other flags."""
    from t2t_lite.export.engines import make_engine, refusal

    capabilities = make_engine(args.engine).capabilities
    sampling = [f"--{name}" for name in SAMPLING_FLAGS if getattr(args, name) is not None]
    if args.random_seed is not None and not sampling:
        parser.error("--random_seed seeds sampling: give --sampling_topk, --sampling_topp or "
                     "--sampling_temperature too")
    if sampling and not capabilities.has("sampling"):
        parser.error(refusal(args.engine, "sampling", sampling[0]))
    if sampling and args.beam_size not in (None, 1):
        parser.error(f"{sampling[0]} draws each token instead of searching: drop --beam_size")
    if sampling and args.score:
        parser.error(f"--score scores given targets: drop {', '.join(sampling)}")
    if len(args.model_dir) > 1:
        explaining = [f"--{flag}" for flag in ("with_alignments", "attention_dir")
                      if getattr(args, flag)]
        if explaining:
            parser.error(f"{explaining[0]} explains one model: pass one --model_dir")
        if not capabilities.has("ensembles"):
            parser.error(refusal(args.engine, "ensembles", "an ensemble (several --model_dir)"))
    if args.checkpoint_path and len(args.checkpoint_path) != len(args.model_dir):
        parser.error("--checkpoint_path names a checkpoint for each --model_dir, in their order: "
                     f"{len(args.checkpoint_path)} for {len(args.model_dir)}")
    if args.alignment_layer is not None and not args.with_alignments:
        parser.error("--alignment_layer needs --with_alignments")
    if args.with_alignments and args.score:
        parser.error("--with_alignments is for translations, not --score's given targets")
    if args.with_alignments and args.split and not args.decode_to_file:
        parser.error("--with_alignments with --split writes them in OUT.tsv: give "
                     "--decode_to_file=OUT")
    if (args.n_best or 1) > 1 and not capabilities.has("n_best") and not sampling:
        parser.error(refusal(args.engine, "n_best", "--n_best", unless=", unless sampling"))


def _check_target_terms(parser, args):
    """parser.error for --glossary and --constraints where they cannot work."""
    from t2t_lite.export.engines import make_engine, refusal

    wanted = [f"--{name}" for name in ("glossary", "constraints") if getattr(args, name)]
    if not wanted:
        return
    if not make_engine(args.engine).capabilities.has("lexical_constraints"):
        parser.error(refusal(args.engine, "lexical_constraints", wanted[0]))
    sampling = [f"--{name}" for name in SAMPLING_FLAGS if getattr(args, name) is not None]
    if sampling:
        parser.error(f"{wanted[0]} needs beam search: drop {', '.join(sampling)}")
    if args.score:
        parser.error(f"--score scores given targets: drop {', '.join(wanted)}")
    if args.constraints and args.split:
        parser.error("--constraints reads each line's phrases from --decode_from_file or stdin: "
                     "drop it or --split (whose sources have none; --glossary works there)")


SAMPLING_FLAGS = ("sampling_topk", "sampling_topp", "sampling_temperature")


def sampling_from_flags(args):
    """The Sampling the flags ask for, or None (search); without --random_seed, a new seed,
    logged so that the samples can be drawn again."""
    if all(getattr(args, name) is None for name in SAMPLING_FLAGS):
        return None
    import logging
    import secrets

    from t2t_lite.decoding.sampling import Sampling

    seed = args.random_seed
    if seed is None:
        seed = secrets.randbelow(2**32)
        logging.getLogger("t2t_lite").info(
            "sampling with --random_seed=%d (give it again to draw the same samples)", seed)
    given = {"top_k": args.sampling_topk, "top_p": args.sampling_topp,
             "temperature": args.sampling_temperature}
    return Sampling(seed=seed, **{name: value for name, value in given.items()
                                  if value is not None})


def main(argv):
    """Returns the metrics of --split, or the score line against --decode_reference.

    TensorFlow is imported here, before any work, for the tensorflow engine and for --split
    on TensorFlow (which reads TFRecords with it); the CTranslate2 engine imports it only if it
    must convert the checkpoint (a cached conversion translates in a fraction of a second), and
    the jax engine never."""
    from t2t_lite.decoding.decode import (
        align_texts,
        decode_file,
        read_pairs,
        read_sources_and_references,
        score_file,
        translate_stream,
    )
    from t2t_lite import backends
    from t2t_lite.decoding.terms import TargetTerms
    from t2t_lite.utils.files import check_writable_file

    args = parse_args(argv)
    backend = backends.current()
    if args.engine == backend.name or args.split:  # --split reads shards with it
        backend.import_framework()
    runners = flags.runners_from_flags(args)
    runner = runners[0]
    if args.score:  # read before loading the model, so that mistakes show at once
        sources, targets = read_pairs(args.decode_from_file, args.score_targets)
    elif args.decode_from_file:
        sources, references = read_sources_and_references(runner.problem, args.decode_from_file,
                                                          args.decode_reference)
    if args.decode_to_file:  # the same: written only at the end
        check_writable_file(args.decode_to_file, "decode_to_file")
    if args.attention_dir:
        from t2t_lite.decoding.attention_plot import require_matplotlib

        require_matplotlib()
    terms = TargetTerms.from_flags(args.glossary, args.constraints)  # the same
    sampling = sampling_from_flags(args)  # before loading the model: a bad value shows at once
    model = None
    checkpoints = args.checkpoint_path or [None] * len(runners)
    if len(runners) > 1:  # the first one's problem and settings, every one's own weights
        from t2t_lite.decoding.ensemble import Ensemble, check_one_vocabulary

        check_one_vocabulary([(r.model_dir, r.vocabulary) for r in runners])
        model = Ensemble([_ensemble_member(r, path) for r, path in zip(runners, checkpoints)])
    translator = runner.translator(model, checkpoint_path=checkpoints[0],
                                   batch_size=args.batch_size, engine=args.engine,
                                   quantization=args.quantization or "float32",
                                   sampling=sampling, **flags.decoding_flags(args))
    if args.with_alignments:  # checks --alignment_layer now rather than after translating
        translator.alignments([], [], args.alignment_layer)
    if args.score:
        score_file(translator, sources, targets, output_path=args.decode_to_file,
                   normalize=args.score_normalize or "none")
        return None
    if args.split:
        from t2t_lite.evaluation.evaluator import score_split

        translate = (functools.partial(terms.translate_texts, translator) if terms else None)
        with runner.data_errors_named():
            evaluator = runner.evaluator(translator, args.split, args.bleu_tokenize, translate)
            metrics, summary = score_split(
                evaluator, args.decode_to_file,
                functools.partial(align_texts, translator, layer=args.alignment_layer)
                if args.with_alignments else None)
        if terms:
            summary = _with_term_accuracy(terms, evaluator.decoded, metrics, summary)
        print(summary)
        return metrics
    if args.decode_from_file:
        report = decode_file(
            translator, runner.problem, sources, args.decode_from_file,
            output_path=args.decode_to_file, n_best=args.n_best, references=references,
            attention_dir=args.attention_dir, bleu_tokenize=args.bleu_tokenize,
            bleu_lowercase=args.bleu_lowercase, with_alignments=args.with_alignments,
            alignment_layer=args.alignment_layer, terms=terms)
        if report is not None:
            print(report)
        return report
    translate_stream(translator, runner.problem, attention_dir=args.attention_dir,
                     with_alignments=args.with_alignments, alignment_layer=args.alignment_layer,
                     terms=terms)
    return None


def _with_term_accuracy(terms, decoded, metrics, summary):
    """--split's summary (and metrics, as term_accuracy, a percentage) with the glossary's term
    accuracy of the decoded split."""
    from t2t_lite.decoding.terms import accuracy_text

    hits, matched = terms.accuracy(decoded.sources, decoded.hypotheses)
    if matched:
        metrics["term_accuracy"] = 100.0 * hits / matched
    return f"{summary}; {accuracy_text(hits, matched)}"


def _ensemble_member(runner, checkpoint_path):
    """The model of one --model_dir of an ensemble; a damaged checkpoint's fix names the
    ensemble's --checkpoint_path, which takes one for each model_dir."""
    from t2t_lite.training.checkpoint_list import DamagedCheckpoint
    from t2t_lite.utils.errors import UserError

    try:
        return runner.restored_model(checkpoint_path)
    except DamagedCheckpoint as error:
        if error.newest_intact is None:
            raise
        raise UserError(f"{error.damage}: pass --checkpoint_path with a checkpoint for each "
                        f"--model_dir, in their order ({error.newest_intact}, the newest intact "
                        f"one, for {runner.model_dir})") from None


def run():
    cli.run(main, tensorflow=False)  # main imports it if it needs it
