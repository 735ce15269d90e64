"""What t2t-lite-decoder does with its input and output: a file of sentences translated in batches
(one output line per input line, or the n best of each), scored against references by the
problem; or lines typed or piped on stdin, translated one at a time, each giving exactly one
output line so that a pipe stays aligned. Either way, with an attention directory, line N's
attention is written as N.png and N.npz. With --score, given translations are scored instead,
one output line per pair.
"""

import logging
import sys
import time

from t2t_lite.data.corpus import (decode_line, lines_as_they_come, read_lines, read_parallel,
                                  read_tsv, tsv_text)
from t2t_lite.decoding.inputs import check_utf8, encode_lines
from t2t_lite.decoding.scoring import target_score
from t2t_lite.decoding.terms import accuracy_text, log_misses
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import write_text_atomically
from t2t_lite.utils.progress import Progress

logger = logging.getLogger("t2t_lite")


def read_sources_and_references(problem, sources_path, references_path=None):
    """The lines of sources_path and, if given, the references the problem reads from
    references_path, one per source; read before any model is loaded, so mistakes show at
    once."""
    sources = list(read_lines(sources_path))
    references = None
    if references_path:
        references = problem.read_references(references_path)
        if len(references) != len(sources):
            raise UserError(f"{references_path} has {len(references)} {problem.reference_unit} "
                            f"but {sources_path} has {len(sources)}: they must be parallel")
    return sources, references


def decode_file(translator, problem, sources, source_name, *, output_path=None, n_best=None,
                references=None, attention_dir=None, bleu_tokenize=None, bleu_lowercase=False,
                with_alignments=False, alignment_layer=None, terms=None):
    """Translates `sources` (the lines of source_name) and writes the postprocessed translations,
    or with n_best the n best of each as `hypothesis<TAB>score` lines, to output_path (default:
    stdout), each followed by <TAB> and its Pharaoh alignment with_alignments; with
    attention_dir, each line's attention; with `terms` (decoding.terms.TargetTerms), outputs
    that contain each line's target phrases (its source is then the line's first field).
    Returns the problem's one-line score against `references` (e.g. sacreBLEU's), with the
    glossary's term accuracy, or None without references."""
    phrases = None
    if terms:
        sources, phrases = terms.split_lines(sources)
    token_lists = encode_lines(translator.vocabulary, sources, source_name,
                               translator.max_input_tokens)
    start = time.perf_counter()
    with Progress("translated", "lines", total=len(token_lists)) as progress:
        if phrases is not None:
            candidates = translator.translate_constrained(token_lists, phrases, n_best or 1,
                                                          progress)
        elif n_best:
            candidates = translator.translate_n_best(token_lists, n_best, progress)
        else:
            candidates = [[t] for t in translator.translate_tokens(token_lists, progress)]
    outputs = [[problem.postprocess(source, t.text) for t in translations]
               for source, translations in zip(sources, candidates)]
    elapsed = time.perf_counter() - start
    logger.info("translated %d lines in %.1f s (%.1f sentences/s)", len(sources), elapsed,
                len(sources) / max(elapsed, 1e-9))
    hypotheses = [texts[0].text for texts in outputs]
    aligned = (alignments_of(translator, token_lists, candidates, alignment_layer)
               if with_alignments else [[None] * len(t) for t in candidates])
    if n_best:
        text = tsv_text((output.text, f"{t.score:.6f}", *([alignment] if with_alignments else []))
                        for texts, translations, alignments in zip(outputs, candidates, aligned)
                        for output, t, alignment in zip(texts, translations, alignments))
    elif with_alignments:
        text = tsv_text((hypothesis, alignments[0])
                        for hypothesis, alignments in zip(hypotheses, aligned))
    else:
        text = "".join(f"{hypothesis}\n" for hypothesis in hypotheses)
    write_output(text, output_path)
    if attention_dir:
        # The model's own output, not the postprocessed text (for parsing: a tree in brackets).
        write_attention(translator, token_lists, [t[0].text for t in candidates], attention_dir)
        logger.info("wrote the attention of %d lines to %s", len(sources), attention_dir)
    accuracy = None
    if phrases is not None:
        met = log_misses([t[0] for t in candidates], source_name)
        logger.info("%d of %d outputs contain all the target phrases of their line", met,
                    len(candidates))
        if terms.glossary:
            accuracy = accuracy_text(*terms.accuracy(sources, hypotheses))
            logger.info("%s", accuracy)
    if references is None:
        return None
    report = problem.reference_report(hypotheses, references,
                                      repaired=sum(texts[0].repaired for texts in outputs),
                                      bleu_tokenize=bleu_tokenize, lowercase=bleu_lowercase)
    return report if accuracy is None else f"{report}\n{accuracy}"


def alignments_of(translator, token_lists, candidates, layer=None):
    """[[str]]: the Pharaoh alignment (t2t_lite.decoding.alignment) of each of the candidate
    Translations of each source (ids), by its translator's engine; the target is the model's
    output text as the vocabulary encodes it (before the problem's postprocess)."""
    sources, targets = [], []
    for tokens, translations in zip(token_lists, candidates):
        for translation in translations:
            sources.append(tokens)
            targets.append(translator.vocabulary.encode_target(translation.text))
    flat = iter(translator.alignments(sources, targets, layer))
    return [[next(flat) for _ in translations] for translations in candidates]


def align_texts(translator, sources, outputs, layer=None):
    """The Pharaoh alignment of each output text (as the model wrote it) to its source text."""
    vocabulary = translator.vocabulary
    return translator.alignments([vocabulary.encode(source) for source in sources],
                                 [vocabulary.encode_target(output) for output in outputs], layer)


def write_output(text, output_path=None):
    """Writes the decoder's output `text` to output_path (atomically), or else to stdout."""
    if output_path:
        write_text_atomically(output_path, text)
        logger.info("wrote %s", output_path)
    else:
        sys.stdout.write(text)


def read_pairs(sources_path, targets_path=None):
    """(sources, targets): the lines of two parallel files, or of one file of source<TAB>target
    lines; read before any model is loaded, so mistakes show at once."""
    pairs = list(read_parallel(sources_path, targets_path) if targets_path
                 else read_tsv(sources_path))
    return [source for source, _ in pairs], [target for _, target in pairs]


def score_file(translator, sources, targets, *, output_path=None, normalize="none"):
    """Scores each target as a translation of its source (no search) and writes, a line per
    pair, `score<TAB>token log-probabilities<TAB>error` to output_path (default: stdout): the
    target's log-probability (normalized as t2t_lite.decoding.scoring.target_score says), each
    of its tokens' (EOS's last) and "". A pair that cannot be scored (an empty side, a line the
    vocabulary cannot encode, a side longer than the model reads) keeps its line, with score
    nan and the reason as its error. Returns the number of such pairs."""
    with Progress("scored", "pairs", total=len(sources)) as progress:
        scored = score_pairs(translator, sources, targets, normalize, progress)
    text = tsv_text(("nan", "", error) if error else
                    (f"{score:.6f}", " ".join(f"{p:.6f}" for p in log_probs), "")
                    for score, log_probs, error in scored)
    write_output(text, output_path)
    failed = [i for i, (_, _, error) in enumerate(scored) if error]
    if failed:
        logger.warning("%d of %d pairs could not be scored: their score is nan, with the reason "
                       "in the third column (line %d: %s)", len(failed), len(scored),
                       failed[0] + 1, scored[failed[0]][2])
    return len(failed)


def score_pairs(translator, sources, targets, normalize="none", progress=None):
    """[(score, token log-probabilities, error)] of each target as a translation of its source
    (score_file's columns; the server's /score): a pair that cannot be scored has score nan,
    no log-probabilities and its reason as error, and the others are scored all the same.
    `progress` (a utils.progress.Progress) counts the pairs scored."""
    vocabulary, hparams = translator.vocabulary, translator.hparams
    longest_target = hparams.max_length + hparams.extra_length  # with EOS, as the search's
    encoded, errors = {}, [""] * len(sources)
    for i, (source, target) in enumerate(zip(sources, targets)):
        try:
            if not (source.strip() and target.strip()):
                raise UserError("an empty source or target")
            check_utf8(source)
            check_utf8(target)
            source_ids, target_ids = vocabulary.encode(source), vocabulary.encode_target(target)
            if len(source_ids) > translator.max_input_tokens:
                raise UserError(f"the source has {len(source_ids)} tokens, more than the "
                                f"{translator.max_input_tokens} the model reads")
            if len(target_ids) >= longest_target:
                raise UserError(f"the target has {len(target_ids)} tokens, more than the "
                                f"{longest_target - 1} the model writes (max_length + "
                                "extra_length - 1)")
            encoded[i] = source_ids, target_ids
        except UserError as error:
            errors[i] = str(error)
    order = sorted(encoded)
    if progress:
        progress.update(len(sources) - len(order))
    log_probs = dict(zip(order, translator.score_tokens(
        [encoded[i][0] for i in order], [encoded[i][1] for i in order], progress)
        if order else []))
    return [(float("nan"), [], error) if error else
            (target_score(log_probs[i], normalize, hparams.alpha),
             [float(p) for p in log_probs[i]], "")
            for i, error in enumerate(errors)]


def write_attention(translator, token_lists, outputs, directory, numbers=None):
    """N.png and N.npz in `directory`: the attention of each source (ids) and its output text
    as the translator gave it, before the problem's postprocess (encoded as the target side),
    numbered by `numbers` (default 1, 2, ...)."""
    from t2t_lite.decoding.attention import attention_weights
    from t2t_lite.decoding.attention_plot import save_attention

    target_tokens = [translator.vocabulary.encode_target(text) for text in outputs]
    save_attention(attention_weights(translator, token_lists, target_tokens), directory,
                   numbers=numbers)


def translate_stream(translator, problem, lines=None, output=None, attention_dir=None,
                     with_alignments=False, alignment_layer=None, terms=None):
    """Translates each line of `lines` (bytes; default stdin) as soon as it comes, writing one
    line to `output` (default stdout) for each (with_alignments: and <TAB> its alignment): a
    line that cannot be translated gives an empty one and a warning on stderr naming it. With
    attention_dir, input line N's attention goes to N.png and N.npz there once its output line
    is written (none for a line that cannot be translated), as for a file; with `terms`, as
    decode_file's, an output that misses some is warned about."""
    lines = lines or sys.stdin.buffer
    output = output or sys.stdout
    prompt = lines is sys.stdin.buffer and sys.stdin.isatty()
    arriving = lines_as_they_come(lines)
    number = 0
    while True:
        if prompt:
            print("> ", end="", file=sys.stderr, flush=True)
        raw = next(arriving, b"")
        if not raw:
            return
        number += 1
        try:
            line, phrases = decode_line(raw, number, "stdin"), None
            if terms:
                line, phrases = terms.split(line)
            tokens = encode_lines(translator.vocabulary, [line], "stdin",
                                  translator.max_input_tokens, number)[0]
        except UserError as error:
            logger.warning("%s: its output line is empty%s", error,
                           ", and it has no attention files" if attention_dir else "")
            print("\t" if with_alignments else "", file=output, flush=True)
            continue
        if phrases is None:
            translation = translator.translate_tokens([tokens], line_numbers=[number])[0]
        else:
            translation = translator.translate_constrained([tokens], [phrases])[0][0]
            log_misses([translation], "stdin", [number])
        text = problem.postprocess(line, translation.text).text
        if with_alignments:
            text += "\t" + alignments_of(translator, [tokens], [[translation]],
                                         alignment_layer)[0][0]
        print(text, file=output, flush=True)
        if attention_dir:
            write_attention(translator, [tokens], [translation.text], attention_dir, [number])
