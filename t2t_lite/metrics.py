"""Scores of decoded text: BLEU through sacrebleu, on detokenized text, with its signature."""

import sacrebleu


def bleu(hypotheses, references, tokenize="13a", lowercase=False):
    """(sacrebleu BLEUScore, signature) of `hypotheses` against one reference each; the score's
    `.score` is in 0..100 and the signature says how it was computed."""
    metric = sacrebleu.BLEU(tokenize=tokenize, lowercase=lowercase)
    score = metric.corpus_score(hypotheses, [references])
    return score, str(metric.get_signature())
