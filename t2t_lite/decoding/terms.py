"""What each input asks its translation to contain (t2t-lite-decoder --glossary and
--constraints), and what the decoder then reports: the outputs that miss some of it, and the
glossary's term accuracy.

An input's target phrases are the target terms of the glossary's matches in it
(t2t_lite.decoding.glossary) and, with --constraints, the TAB-separated fields after its source
text (`source<TAB>phrase<TAB>phrase...`, as fairseq's --constraints reads them), each once, in
that order. The search then puts them into the output (t2t_lite.decoding.lexical).
"""

import logging

from t2t_lite.decoding.glossary import Glossary, term_accuracy

logger = logging.getLogger("t2t_lite")
# The lines named one by one when outputs miss phrases; the rest are counted.
NAMED_MISSES = 10


class TargetTerms:
    """The target phrases each input line asks for: its glossary terms' targets (`glossary`, a
    Glossary or None) and, with `columns`, its own TAB-separated ones."""

    def __init__(self, glossary=None, columns=False):
        self.glossary = glossary
        self.columns = columns

    @classmethod
    def from_flags(cls, glossary_path, columns):
        """The TargetTerms of --glossary and --constraints, or None without either."""
        if not glossary_path and not columns:
            return None
        return cls(Glossary.read(glossary_path) if glossary_path else None, columns)

    def split(self, line):
        """(source text, [target phrase]) of an input line."""
        source, *given = line.split("\t") if self.columns else (line,)
        phrases = self.glossary.constraints(source) if self.glossary else []
        phrases += [" ".join(phrase.split()) for phrase in given]
        return source, [phrase for phrase in dict.fromkeys(phrases) if phrase]

    def split_lines(self, lines):
        """([source text], [[target phrase]]) of input lines."""
        pairs = [self.split(line) for line in lines]
        return [source for source, _ in pairs], [phrases for _, phrases in pairs]

    def translate_texts(self, translator, token_lists, progress=None):
        """translator.translate_tokens for `token_lists` with the glossary's phrases of each (as
        the evaluator of --split calls it: the sources as ids, decoded back to text here)."""
        phrases = [self.split(translator.vocabulary.decode(tokens))[1] for tokens in token_lists]
        return [best[0] for best in translator.translate_constrained(token_lists, phrases, 1,
                                                                     progress)]

    def accuracy(self, sources, outputs):
        """The glossary's term accuracy of `outputs`: (hits, matched terms)."""
        return term_accuracy(sources, outputs, self.glossary)


def accuracy_text(hits, matched):
    """'term accuracy 96.0 (48 of 50 glossary terms)', or a note that none matched."""
    if not matched:
        return "term accuracy: no glossary term occurs in the sources"
    return (f"term accuracy {100.0 * hits / matched:.1f} ({hits} of {matched} glossary terms "
            "in the outputs)")


def log_misses(translations, source_name, numbers=None):
    """Warns about each output (a ConstrainedTranslation, numbered as `numbers` gives, default
    1, 2, ...) that misses some of its phrases; returns how many outputs met all theirs."""
    numbers = numbers or range(1, len(translations) + 1)
    missing = [(number, t) for number, t in zip(numbers, translations) if t.unmet]
    for number, translation in missing[:NAMED_MISSES]:
        logger.warning("%s line %d: its output misses %s (an empty line, or an output cut at "
                       "its length limit: raise --extra_length)",
                       source_name, number, ", ".join(repr(p) for p in translation.unmet))
    if len(missing) > NAMED_MISSES:
        logger.warning("... and %d more lines miss some of their phrases",
                       len(missing) - NAMED_MISSES)
    return len(translations) - len(missing)
