"""Scores of decoded text: BLEU and chrF through sacrebleu, on detokenized text, with signatures."""

import importlib.util
import logging

BLEU_TOKENIZERS = ("13a", "intl", "none", "char", "zh", "ja-mecab", "ko-mecab", "flores101",
                   "flores200")


def bleu_tokenizer_for(language):
    """sacreBLEU's tokenizer for text in `language` (an ISO 639-1 code or None), as WMT scores
    it: zh for Chinese, ja-mecab for Japanese when MeCab and its dictionary are installed, 13a
    otherwise."""
    language = (language or "").lower().split("-")[0].split("_")[0]
    if language == "zh":
        return "zh"
    if language == "ja" and all(importlib.util.find_spec(module) for module in ("MeCab",
                                                                                "ipadic")):
        return "ja-mecab"
    return "13a"


class _EachMessageOnce(logging.Filter):
    """Passes each message once a process: sacreBLEU repeats its advice (e.g. "It looks like you
    forgot to detokenize your test data", three lines) at every corpus score, which in training
    is every evaluation."""

    def __init__(self):
        super().__init__()
        self.seen = set()

    def filter(self, record):
        message = record.getMessage()
        if message in self.seen:
            return False
        self.seen.add(message)
        return True


_SACREBLEU_ADVICE_ONCE = _EachMessageOnce()


def bleu(hypotheses, references, tokenize="13a", lowercase=False):
    """(sacrebleu BLEUScore, signature) of `hypotheses` against one reference each; the score's
    `.score` is in 0..100 and the signature says how it was computed. sacreBLEU's warnings are
    logged once a process."""
    import sacrebleu  # a fifth of a second: not for a decoder that scores nothing

    sacrebleu_logger = logging.getLogger("sacrebleu")
    if _SACREBLEU_ADVICE_ONCE not in sacrebleu_logger.filters:
        sacrebleu_logger.addFilter(_SACREBLEU_ADVICE_ONCE)

    metric = sacrebleu.BLEU(tokenize=tokenize, lowercase=lowercase)
    score = metric.corpus_score(hypotheses, [references])
    return score, str(metric.get_signature())


def chrf(hypotheses, references):
    """sacreBLEU's chrF (character 6-grams, beta 2) in 0..100; needs no tokenizer."""
    import sacrebleu

    return sacrebleu.CHRF().corpus_score(hypotheses, [references]).score
