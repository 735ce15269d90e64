"""Term accuracy, BLEU and speed of decoding with a glossary, on a real corpus's dev set.

The glossary is made from the dev set's own references, as terminology evaluations make theirs
(Dinu et al. 2019 kept Wiktionary and IATE terms where the reference uses them): each rare
content word of a reference (letters only, 4 or more, not a stop word, in 2 to --max_count
training targets) with the word of its source line most associated with it in the training
pairs, by the Dice coefficient of the lines they occur in (at least --min_dice); a source word
that several targets choose keeps its most associated one. Its terms are right for the
references they come from, but applied wherever their source word occurs, as a client's
glossary is. What is measured is how much of it the search puts into the outputs (term
accuracy: the share of glossary terms found in the sources whose target is in the output) and
what that does to BLEU and speed, not the glossary's quality.

Dev is translated without, then with the glossary by one in-process translator (the
model_dir's beam size and alpha), each timed around the translation alone after a warm-up
(tracing) on its first lines; then the lines with terms alone, without and with them (the
constrained search's own cost: the lines without terms take the plain search). BLEU is
sacreBLEU's on the corpus's tokens (tokenize none), term accuracy
t2t_lite.decoding.glossary.term_accuracy's. Run it alone.

    python benchmarks/glossary.py --corpus ../shared/corpora/small_parallel_enja \\
        --direction ja-en --model_dir /tmp/t2t_quality/ja-en/transformer_small_data/avg
"""

import argparse
import collections
import os
import sys
import time

import sacrebleu

sys.path.insert(0, os.path.dirname(__file__))
import record  # noqa: E402

STOP_WORDS = set("""about above after again against also among because been before being
below between both could does doing down during each either every from have having here into
itself just more most much must neither never other over same should since some such than that
their them then there these they this those through under until very were what when where
which while will with would your""".split())
WARM_UP = 16  # lines translated before each timing, so that tracing is not timed


def make_glossary(sources, references, train_sources, train_targets, max_count, min_dice):
    """{source word: target word} for the rare content words of dev's references (module
    docstring), each with the word of its source line most associated with it in train."""
    def content(word, counts):
        return (len(word) >= 4 and word.isalpha() and word.lower() not in STOP_WORDS
                and 2 <= counts[word] <= max_count)

    target_counts = collections.Counter(w for line in train_targets for w in set(line.split()))
    source_counts = collections.Counter(w for line in train_sources for w in set(line.split()))
    wanted = {w for line in references for w in line.split() if content(w, target_counts)}
    together = collections.Counter()
    for source, target in zip(train_sources, train_targets):
        found = wanted.intersection(target.split())
        if found:
            words = set(source.split())
            together.update((s, t) for t in found for s in words)

    def dice(s, t):
        return 2 * together[s, t] / (source_counts[s] + target_counts[t])

    best = {}  # source word -> (Dice, target)
    for source, reference in zip(sources, references):
        words = [w for w in set(source.split()) if w.isalnum()]
        for target in set(reference.split()) & wanted:
            score, word = max(((dice(w, target), w) for w in words), default=(0, None))
            if score >= min_dice and score > best.get(word, (0, None))[0]:
                best[word] = (score, target)
    return {word: target for word, (_, target) in best.items()}


def timed(translate, token_lists, *phrases):
    """(translations, seconds) of translate(token_lists, *phrases), after a warm-up."""
    translate(token_lists[:WARM_UP], *(p[:WARM_UP] for p in phrases))
    start = time.perf_counter()
    translations = translate(token_lists, *phrases)
    return translations, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--corpus", required=True, help="train/dev.LANG files")
    parser.add_argument("--direction", default="ja-en", help="SOURCE-TARGET languages")
    parser.add_argument("--max_count", type=int, default=50,
                        help="a term's target is in at most this many train lines")
    parser.add_argument("--min_dice", type=float, default=0.5,
                        help="the least Dice coefficient of a term's two words in train")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--glossary_out", help="also write the glossary made, as a TSV file")
    record.add_record_flag(parser, example="quality/ja-en_glossary.json")
    args = parser.parse_args()

    from t2t_lite.data.corpus import read_lines
    from t2t_lite.decoding.glossary import Glossary, term_accuracy
    from t2t_lite.runner import Runner

    def lines(path):
        return list(read_lines(path))

    source_lang, target_lang = args.direction.split("-")
    sources = lines(os.path.join(args.corpus, f"dev.{source_lang}"))
    references = lines(os.path.join(args.corpus, f"dev.{target_lang}"))
    entries = make_glossary(sources, references,
                            lines(os.path.join(args.corpus, f"train.{source_lang}")),
                            lines(os.path.join(args.corpus, f"train.{target_lang}")),
                            args.max_count, args.min_dice)
    runner = Runner.from_model_dir(args.model_dir)
    translator = runner.translator(batch_size=args.batch_size)
    glossary = Glossary(sorted(entries.items()))
    if args.glossary_out:
        with open(args.glossary_out, "w", encoding="utf-8") as f:
            f.writelines(f"{s}\t{t}\n" for s, t in sorted(entries.items()))
    phrases = [glossary.constraints(source) for source in sources]
    token_lists = [translator.vocabulary.encode(s) for s in sources]
    plain, plain_seconds = timed(translator.translate_tokens, token_lists)
    constrained, constrained_seconds = timed(
        lambda tokens, wanted: [best[0] for best in translator.translate_constrained(
            tokens, wanted)], token_lists, phrases)
    with_terms = [i for i, wanted in enumerate(phrases) if wanted]
    # The search's own cost: the lines with terms alone, without and with them.
    subset = [token_lists[i] for i in with_terms]
    _, plain_subset = timed(translator.translate_tokens, subset)
    _, constrained_subset = timed(lambda tokens, wanted: translator.translate_constrained(
        tokens, wanted), subset, [phrases[i] for i in with_terms])
    bleu = sacrebleu.metrics.BLEU(tokenize="none")
    rows = []
    for name, translations, seconds, subset_seconds in (
            ("without the glossary", plain, plain_seconds, plain_subset),
            ("with the glossary", constrained, constrained_seconds, constrained_subset)):
        outputs = [runner.problem.postprocess(s, t.text).text
                   for s, t in zip(sources, translations)]
        hits, matched = term_accuracy(sources, outputs, glossary)
        rows.append([
            name, round(100.0 * hits / matched, 1),
            round(bleu.corpus_score(outputs, [references]).score, 2),
            round(bleu.corpus_score([outputs[i] for i in with_terms],
                                    [[references[i] for i in with_terms]]).score, 2),
            round(len(sources) / seconds, 1), round(len(with_terms) / subset_seconds, 1)])
    missing = sum(bool(t.unmet) for t in constrained)
    header = ["decoding", "term accuracy (%)", "dev BLEU", "BLEU of the lines with terms",
              "sentences/s", "sentences/s of the lines with terms"]
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(value) for value in row) + " |")
    notes = [
        f"{args.direction}, {len(sources)} dev lines of {args.corpus}; a glossary of "
        f"{len(glossary)} terms made from the dev references (targets in 2 to "
        f"{args.max_count} train lines, Dice >= {args.min_dice}; see the script), found "
        f"{matched} times in "
        f"{len(with_terms)} lines; with it, {missing} outputs miss a term",
        f"model {args.model_dir}, beam size {runner.hparams.beam_size}, alpha "
        f"{runner.hparams.alpha}, batches of {args.batch_size} lines",
        f"sacreBLEU {bleu.get_signature()}"]
    print("\n".join(notes))
    if args.record:
        record.write_record(
            args.record, f"A glossary's terms in the translations, {args.direction} dev",
            [header[0], {"name": header[1], "digits": 1}, {"name": header[2], "digits": 2},
             {"name": header[3], "digits": 2}, {"name": header[4], "digits": 1},
             {"name": header[5], "digits": 1}], rows, notes)


if __name__ == "__main__":
    main()
