"""The CTranslate2 engine: a Translator with the same interface and outputs, run by CTranslate2.

Search follows t2t_lite's where CTranslate2 allows it: each input is truncated to max_length
tokens with its EOS, its output to input length + extra_length tokens (inputs are batched by
equal length, since CTranslate2's limit is per batch), PAD is never generated, empty inputs give
empty outputs with score 0. Greedy search gives the same tokens and scores as t2t_lite's.
Beam search: CTranslate2's length penalty (log-probability / length ** alpha) is not GNMT's
((5 + length) / 6) ** alpha. So CTranslate2 searches without one and returns its beam_size
finished hypotheses with their log-probabilities, and the engine picks the one GNMT's penalty
ranks first, as t2t_lite's search does (the same beam-4 translation for all 500 sentences of a
trained toy model; CTranslate2's own penalty at the best-matching exponent, 80%). CTranslate2
still stops once beam_size hypotheses have ended (t2t_lite's search, once no alive one can win),
so outputs can still differ in rare cases. Scores are t2t_lite's: the log-probability divided by
GNMT's penalty. The minimum length is min_decoding_length; as CTranslate2 then renormalizes
without EOS, the hypotheses' log-probabilities are asked of score_batch (_model_log_probs).

Sampling draws from the distribution t2t_lite's sampling draws from (CTranslate2's top-k, top-p
and temperature, PAD suppressed), and its scores are asked of score_batch, so they are the
model's. Alignments come from return_attention, which the conversion points at the layer and
heads t2t_lite aligns by. No n-best lists of the beam (its hypotheses are the first to end, not
the best) and no ensembles.
"""

import numpy as np

from t2t_lite.config import EOS_ID, PAD_ID
from t2t_lite.decoding.alignment import default_layer, pharaoh, resolve_layer
from t2t_lite.decoding.inputs import length_batches, max_input_tokens
from t2t_lite.decoding.scoring import gnmt_penalty
from t2t_lite.decoding.translation import Translation
from t2t_lite.utils.errors import UserError

QUANTIZATIONS = ("float32", "int8", "int8_float32")
# Why this engine lacks what the in-process ones have (t2t_lite.export.engines' Capabilities).
# CTranslate2's beam also holds beam_size hypotheses, but it stops once they have ended: they
# are the first to end, often short, not the n best that t2t_lite's search keeps looking for.
NO_N_BEST = "CTranslate2's beam stops at the first hypotheses to end"
NO_ATTENTION = "CTranslate2 does not return attention weights"
NO_ENSEMBLES = "CTranslate2 has no ensembles"
NO_CONSTRAINTS = "CTranslate2 cannot run a constrained search (e.g. to well-formed trees)"
NO_LEXICAL_CONSTRAINTS = "CTranslate2 has no lexically constrained search (its issue #1893)"
N_BEST_NEEDS_SEARCH = f"--n_best needs the tensorflow or jax engine, unless sampling: {NO_N_BEST}"


def import_ctranslate2():
    try:
        import ctranslate2
    except ImportError:
        raise UserError("the CTranslate2 engine needs the ctranslate2 package: "
                        "pip install 't2t_lite[ctranslate2]'") from None
    return ctranslate2


def check_quantization(quantization):
    if quantization not in QUANTIZATIONS:
        raise UserError(f"--quantization={quantization}: use one of {', '.join(QUANTIZATIONS)}")


class CTranslate2Translator:
    """Translates with the CTranslate2 model directory `model_path` (see ctranslate2_export),
    `vocabulary` and the decoding hparams, like Translator; `quantization` is applied on
    loading (int8 runs a float32 conversion with int8 weights)."""

    def __init__(self, model_path, vocabulary, hparams, batch_size=32, quantization="float32",
                 sampling=None):
        check_quantization(quantization)
        ctranslate2 = import_ctranslate2()
        self.vocabulary = vocabulary
        self.hparams = hparams
        self.batch_size = batch_size
        self.sampling = sampling
        self.max_input_tokens = max_input_tokens(hparams)
        self._translator = ctranslate2.Translator(model_path, device="cpu",
                                                  compute_type=quantization)
        self._tokens = vocabulary.tokens()
        self._ids = {token: i for i, token in enumerate(self._tokens)}

    def is_truncated(self, tokens):
        """Whether translating `tokens` (ids without EOS) will drop some of them."""
        return len(tokens) > self.max_input_tokens

    def translate(self, texts):
        """[str] -> [Translation], in the same order."""
        return self.translate_tokens([self.vocabulary.encode(text) for text in texts])

    def translate_tokens(self, token_lists, progress=None, line_numbers=None):
        """[[id]] without EOS -> [Translation], in the same order, or with sampling a sample of
        each. `progress` (a utils.progress.Progress) counts the lines done."""
        return [translations[0] for translations in
                self.translate_n_best(token_lists, 1, progress, line_numbers)]

    def translate_n_best(self, token_lists, n, progress=None, line_numbers=None):
        """[[id]] without EOS -> [[Translation] * n], like Translator.translate_n_best, for
        n samples of each, best first (or n = 1: translate_tokens).
        CTranslate2 draws from one random generator, seeded anew for each batch from the seed
        and the batch's first line number (line_numbers, default 1, 2, ...): the samples repeat
        with the same seed, inputs and batch size."""
        if not self.sampling and n > 1:
            raise UserError(N_BEST_NEEDS_SEARCH)
        line_numbers = line_numbers or range(1, len(token_lists) + 1)
        rows = [list(tokens[: self.max_input_tokens]) for tokens in token_lists]
        results = [[Translation("", 0.0)] * n for _ in rows]
        nonempty = [i for i, row in enumerate(rows) if row]
        if progress:
            progress.update(len(rows) - len(nonempty))
        for chunk in length_batches([rows[i] for i in nonempty], self.batch_size,
                                    same_length=True):
            batch = [rows[nonempty[i]] for i in chunk]
            if self.sampling:
                ranked = self._sample(batch, len(batch[0]) + 1, n,
                                      line_numbers[nonempty[chunk[0]]])
            else:
                ranked = [[best] for best in self._search(batch, len(batch[0]) + 1)]
            for i, translations in zip(chunk, ranked):
                results[nonempty[i]] = translations[:n]
            if progress:
                progress.update(len(chunk))
        return results

    def score_tokens(self, source_lists, target_lists, progress=None):
        """Like Translator.score_tokens: each target token's log-probability (EOS's last)
        given its source, from CTranslate2's score_batch."""
        tokens = self._tokens
        results = self._translator.score_batch(
            [[tokens[i] for i in ids] for ids in source_lists],
            [[tokens[i] for i in ids] for ids in target_lists],
            max_batch_size=self.batch_size, max_input_length=0)
        if progress:
            progress.update(len(source_lists))
        return [np.asarray(result.log_probs, "float32") for result in results]

    def alignments(self, source_lists, target_lists, layer=None):
        """Like Translator.alignments, from the attention CTranslate2 returns when forced
        through each target (target_prefix): the conversion's, the heads of the penultimate
        decoder layer (export.ctranslate2), so that is the only layer it can align by."""
        num_layers = self.hparams.num_decoder_layers
        if resolve_layer(layer, num_layers) != default_layer(num_layers):
            raise UserError(f"--alignment_layer={layer} needs the tensorflow engine: the "
                            "CTranslate2 conversion returns the penultimate layer's attention")
        tokens = self._tokens
        results = [""] * len(source_lists)
        pairs = [i for i, (source, target) in enumerate(zip(source_lists, target_lists))
                 if source and target]
        for chunk in length_batches([target_lists[i] for i in pairs], self.batch_size):
            chosen = [pairs[i] for i in chunk]
            targets = [[tokens[t] for t in target_lists[i]] for i in chosen]
            translated = self._translator.translate_batch(
                [[tokens[t] for t in source_lists[i][: self.max_input_tokens]] for i in chosen],
                target_prefix=targets, beam_size=1, min_decoding_length=0, max_input_length=0,
                max_decoding_length=max(map(len, targets)) + 1, return_attention=True)
            for i, target, result in zip(chosen, targets, translated):
                results[i] = pharaoh(np.asarray(result.attention[0])[: len(target)])
        return results

    def _search(self, rows, input_length):
        """Rows of input_length - 1 ids -> [Translation].

        CTranslate2 can only forbid a token by removing it from the softmax, which would change
        every score by PAD's share (not small: label smoothing gives PAD as much as any wrong
        token). So PAD is allowed, and the rare rows whose result holds PAD (e.g. of an
        untrained model) are searched again without it; only their scores exclude PAD's share.
        """
        beam_size, alpha = self.hparams.beam_size, self.hparams.alpha
        pad = self._tokens[PAD_ID]

        def search(batch, suppress=None):
            return self._translator.translate_batch(
                [[self._tokens[i] for i in row] for row in batch], beam_size=beam_size,
                num_hypotheses=beam_size, length_penalty=0.0,
                max_decoding_length=input_length + self.hparams.extra_length,
                min_decoding_length=self.hparams.min_length, max_input_length=0,
                return_scores=True, return_end_token=True, suppress_sequences=suppress)

        def ranked(batch, results, suppressed=False):
            """(score, ids) of the hypothesis of each result that GNMT's length penalty ranks
            first, by the model's log-probabilities (see _model_log_probs)."""
            hypotheses = [[[self._ids[token] for token in tokens] for tokens in r.hypotheses]
                          for r in results]
            min_length = self.hparams.min_length
            if min_length == 0 or (min_length == 1 and not suppressed):
                # EOS is left out of the first step's softmax only, for every hypothesis alike:
                # its share there is put back (log(1 - P(EOS first))), without rescoring.
                shares = (np.log1p(-np.exp(self._first_eos_log_probs(batch))) if min_length
                          else np.zeros(len(batch)))
                log_probs = [[score + share for score in r.scores]
                             for r, share in zip(results, shares)]
            else:
                log_probs = self._model_log_probs(batch, hypotheses)
            return [max(((log_prob / gnmt_penalty(len(ids), alpha), ids)
                         for ids, log_prob in zip(row_hypotheses, row_log_probs)),
                        key=lambda scored: scored[0])
                    for row_hypotheses, row_log_probs in zip(hypotheses, log_probs)]

        results = ranked(rows, search(rows))
        with_pad = [i for i, (_, ids) in enumerate(results) if PAD_ID in ids]
        if with_pad:
            again = [rows[i] for i in with_pad]
            for i, result in zip(with_pad, ranked(again, search(again, [[pad]]), True)):
                results[i] = result
        return [Translation(self.vocabulary.decode(ids), score) for score, ids in results]

    def _first_eos_log_probs(self, rows):
        """log P(EOS first | row) of each row (ids without EOS)."""
        tokens = self._tokens
        return [result.log_probs[0] for result in self._translator.score_batch(
            [[tokens[i] for i in row] for row in rows], [[] for _ in rows],
            max_batch_size=self.batch_size, max_input_length=0)]

    def _model_log_probs(self, rows, hypotheses):
        """The model's log-probability of each of the hypotheses (ids, ending with EOS unless
        cut at their limit) of each row, from score_batch. CTranslate2's own scores leave out
        the share of a token it forbids (EOS before min_decoding_length, a suppressed PAD), as
        it renormalizes without it; t2t_lite's never do."""
        flat = [ids for row_hypotheses in hypotheses for ids in row_hypotheses]
        ended = [bool(ids) and ids[-1] == EOS_ID for ids in flat]
        log_probs = self.score_tokens(
            [row for row, row_hypotheses in zip(rows, hypotheses) for _ in row_hypotheses],
            [ids[:-1] if end else ids for ids, end in zip(flat, ended)])
        sums = iter(float(np.sum(p[: len(ids)])) for p, ids in zip(log_probs, flat))
        return [[next(sums) for _ in row_hypotheses] for row_hypotheses in hypotheses]

    def _sample(self, rows, input_length, n, first_line):
        """Rows of input_length - 1 ids -> n samples of each, as [Translation] best first.

        PAD is removed from the softmax (suppress_sequences), which is what t2t_lite's
        sampling draws from too; the scores, which would then lack PAD's share, are the model's
        (_model_log_probs), as the TensorFlow engine's are."""
        import ctranslate2

        sampling, tokens = self.sampling, self._tokens
        ctranslate2.set_random_seed((sampling.seed * 1_000_003 + first_line) % 2**32)
        sources = [[tokens[i] for i in row] for row in rows]
        results = self._translator.translate_batch(
            sources, beam_size=1, num_hypotheses=n, sampling_topk=sampling.top_k,
            sampling_topp=sampling.top_p, sampling_temperature=sampling.temperature,
            max_decoding_length=input_length + self.hparams.extra_length,
            min_decoding_length=self.hparams.min_length, max_input_length=0,
            return_end_token=True, suppress_sequences=[[tokens[PAD_ID]]])
        samples = [[[self._ids[token] for token in hypothesis] for hypothesis in r.hypotheses]
                   for r in results]
        alpha = self.hparams.alpha
        return [[Translation(self.vocabulary.decode(ids), score) for score, ids in
                 sorted(((log_prob / gnmt_penalty(len(ids), alpha), ids)
                         for ids, log_prob in zip(row_samples, row_log_probs)),
                        key=lambda scored: -scored[0])]
                for row_samples, row_log_probs in zip(samples,
                                                      self._model_log_probs(rows, samples))]
