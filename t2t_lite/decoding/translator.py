"""Translator: what the in-process engines (TensorFlow's and JAX's) share, written once: text ->
ids -> search -> text in batches of similar length, n-best lists, sampling, empty inputs,
scoring given targets and alignments. Each engine supplies only its compiled steps of the
keras.ops search (t2t_lite.decoding.search), scoring and sampling: a tf.function on TensorFlow
(t2t_lite.backends.tensorflow.translator), a jax.jit with padded shapes on JAX
(t2t_lite.backends.jax.translator). Backend-neutral: keras and numpy only.

The engine's steps take numpy int32 inputs, EOS-terminated and PAD-padded, and return arrays
with at least the batch's rows (an engine may pad a batch to a shape it compiled):
  _run_search(inputs) -> (ids [rows, length], scores [rows])   the best of each (search)
  _run_beam(inputs) -> (ids [rows, beam, length], scores [rows, beam])   beam_search
  _run_sample(inputs, uniforms) -> (ids [rows, length], scores [rows])   a drawn sample of each
  _run_score(inputs, targets) -> float32 [rows, length]   token_log_probs
  _run_constrained(inputs, phrases) -> (ids [rows, beam, length], scores [rows, beam], met
      [rows, beam, C])   constrained_beam_search, phrases int32 [rows, C, L]
"""

import functools

import numpy as np

from t2t_lite.decoding.alignment import pharaoh, resolve_layer
from t2t_lite.decoding.attention import attention_weights
from t2t_lite.decoding.inputs import length_batches, max_input_tokens, padded, phrase_array
from t2t_lite.decoding.search import SearchSettings
from t2t_lite.decoding.translation import ConstrainedTranslation, n_best_translations
from t2t_lite.decoding.visible_ending import blank_ids
from t2t_lite.utils.errors import UserError


class Translator:
    """Translates with `model` and `vocabulary` by the decoding hparams (beam_size, alpha,
    extra_length, min_length: `settings`, a SearchSettings) and the input limit max_length.

    Scores are the length-penalized log-probabilities of the outputs (see
    t2t_lite.decoding.search); an empty input has the empty output and score 0.

    At min_length 1 or more no output ends with a token that shows no text (`blank`, its ids;
    t2t_lite.decoding.visible_ending), so none is empty. A problem may add its own search
    `constraint` (see t2t_lite.decoding.search; parsing: well-formed trees).

    With `sampling` (t2t_lite.decoding.sampling.Sampling), translate_tokens and translate_n_best
    draw samples instead of searching. `model` may be a decoding.ensemble.Ensemble.
    """

    def __init__(self, model, vocabulary, hparams, batch_size=32, constraint=None,
                 sampling=None):
        self.model = model
        self.vocabulary = vocabulary
        self.hparams = hparams
        self.batch_size = batch_size
        self.max_input_tokens = max_input_tokens(hparams)
        self.constraint = constraint
        self.sampling = sampling
        self.settings = SearchSettings.of(hparams)  # the search's; sampling draws by its own
        self.sample_settings = self.settings.replace(sampling=sampling) if sampling else None
        self.blank = blank_ids(vocabulary) if hparams.min_length >= 1 else ()

    def is_truncated(self, tokens):
        """Whether translating `tokens` (ids without EOS) will drop some of them."""
        return len(tokens) > self.max_input_tokens

    def translate(self, texts):
        """[str] -> [Translation], in the same order."""
        return self.translate_tokens([self.vocabulary.encode(text) for text in texts])

    def translate_tokens(self, token_lists, progress=None, line_numbers=None):
        """[[id]] without EOS -> [Translation], in the same order; translated in batches of
        similar length so that little of the search is spent on padding. `progress` (a
        utils.progress.Progress) counts the lines done. With sampling, each is a sample drawn
        by the stream of its line number (line_numbers, default 1, 2, ...)."""
        if self.sampling:
            return [samples[0] for samples in self.translate_n_best(token_lists, 1, progress,
                                                                   line_numbers)]
        return self._translate_best(token_lists, progress)

    def _translate_best(self, token_lists, progress):
        """[Translation] of each of token_lists, the search's best; an engine may translate
        otherwise (TensorFlow: through its exported in-graph step)."""
        return [best[0] for best in self._search_nonempty(
            token_lists, 1, progress,
            lambda indices, inputs: tuple(np.asarray(x)[:, None]
                                          for x in self._run_search(inputs)))]

    def translate_n_best(self, token_lists, n, progress=None, line_numbers=None):
        """[[id]] without EOS -> [[Translation] * n]: beam search's n best finished hypotheses
        of each input, best first, the first as translate_tokens gives it; with sampling, n
        samples of each, drawn by the streams of its line number (line_numbers, default 1, 2,
        ...), best first. An empty input has n empty outputs of score 0."""
        if self.sampling:
            return self._search_nonempty(token_lists, n, progress, functools.partial(
                self._draw, n, line_numbers or range(1, len(token_lists) + 1)))
        if n == 1:
            return [[translation]
                    for translation in self.translate_tokens(token_lists, progress)]
        self._check_n_best(n)
        return self._search_nonempty(token_lists, n, progress,
                                     lambda indices, inputs: self._run_beam(inputs))

    def translate_constrained(self, token_lists, phrases, n=1, progress=None):
        """[[id]] without EOS and each input's target phrases ([str]: a glossary's terms, the
        user's constraints) -> [[ConstrainedTranslation] * n]: beam search's n best outputs
        that contain them (t2t_lite.decoding.search.constrained_beam_search), those meeting all
        first, each naming in `unmet` those it misses (only an output cut at its length limit
        may); an input without phrases gets its outputs without any."""
        if self.sampling:
            raise UserError("target phrases (--glossary, --constraints) need beam search: drop "
                            "the sampling flags")
        self._check_n_best(n)
        # The inputs without phrases take the plain search: the outputs they would get with
        # none (see search.constrained_beam_search), without the phrases' bookkeeping.
        wanted = [i for i, line in enumerate(phrases) if line]
        plain = [i for i, line in enumerate(phrases) if not line]
        results = [None] * len(token_lists)
        if plain:
            for i, best in zip(plain, self.translate_n_best([token_lists[i] for i in plain], n,
                                                            progress)):
                results[i] = [ConstrainedTranslation(t.text, t.score, ()) for t in best]
        phrase_ids = [[self.vocabulary.encode_target(phrase) for phrase in phrases[i]]
                      for i in wanted]
        for i, best in zip(wanted, n_best_translations(
                [token_lists[i] for i in wanted], n, lambda indices, inputs: (
                    self._run_constrained(inputs, phrase_array([phrase_ids[k]
                                                                for k in indices]))),
                self.vocabulary, self.batch_size, self.max_input_tokens, progress,
                [phrases[i] for i in wanted])):
            results[i] = best
        return results

    def _check_n_best(self, n):
        if n > self.settings.beam_size:
            raise UserError(f"--n_best={n} needs --beam_size={n} or more: the beam holds the "
                            "hypotheses")

    def _draw(self, n, line_numbers, indices, inputs):
        """(ids [batch, n, length], scores [batch, n]): n samples of each row of `inputs`, the
        inputs of token_lists[indices]."""
        rows = len(indices)
        uniforms = self.sampling.uniforms([line_numbers[i] for i in indices], n,
                                          inputs.shape[1] + self.settings.extra_length)
        ids, scores = (np.asarray(x) for x in self._run_sample(np.repeat(inputs, n, axis=0),
                                                               uniforms))
        return ids[: rows * n].reshape(rows, n, -1), scores[: rows * n].reshape(rows, n)

    def _search_nonempty(self, token_lists, n, progress, search_batch):
        return n_best_translations(token_lists, n, search_batch, self.vocabulary,
                                   self.batch_size, self.max_input_tokens, progress)

    def score_tokens(self, source_lists, target_lists, progress=None):
        """[[id]] sources and their [[id]] targets, without EOS -> [float32 [len(target) + 1]]:
        the log-probability of each target token given the source and the tokens before it,
        EOS's last (t2t_lite.decoding.scoring). Sources must fit max_input_tokens."""
        results = [None] * len(source_lists)
        for chunk in length_batches(source_lists, self.batch_size):
            log_probs = self._run_score(padded([source_lists[i] for i in chunk], eos=True),
                                        padded([target_lists[i] for i in chunk], eos=True))
            for i, row in zip(chunk, np.asarray(log_probs)):
                results[i] = row[: len(target_lists[i]) + 1]
            if progress:
                progress.update(len(chunk))
        return results

    def alignments(self, source_lists, target_lists, layer=None):
        """[[id]] sources and their [[id]] targets, without EOS -> the Pharaoh alignment of
        each target to its source by the heads of decoder layer `layer` (default: the
        penultimate; see t2t_lite.decoding.alignment), from one teacher-forced pass."""
        layer = resolve_layer(layer, self.hparams.num_decoder_layers)
        return [pharaoh(attention.encoder_decoder[layer].mean(axis=0)[:-1, :-1])
                for attention in attention_weights(self, source_lists, target_lists)]

    def _run_search(self, inputs):
        raise NotImplementedError(f"{type(self).__name__} runs no search")

    def _run_beam(self, inputs):
        raise NotImplementedError(f"{type(self).__name__} runs no beam search")

    def _run_sample(self, inputs, uniforms):
        raise NotImplementedError(f"{type(self).__name__} draws no samples")

    def _run_score(self, inputs, targets):
        raise NotImplementedError(f"{type(self).__name__} scores no targets")

    def _run_constrained(self, inputs, phrases):
        raise NotImplementedError(f"{type(self).__name__} runs no constrained search")
