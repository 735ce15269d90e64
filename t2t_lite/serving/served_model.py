"""One model as t2t-lite-serve serves it: the decoder's translations, n-best lists, samples,
alignments, attention and scores of given pairs, with each request's options, on one engine.

The Keras model is restored (or CTranslate2's conversion loaded) once; a translator is made for
each set of search options a request asks for and kept (the few last used), since making one
compiles its search anew. A sampling seed only numbers the streams of uniforms that drive the
draws (t2t_lite.decoding.sampling), not the compiled steps, so one translator serves every
seed. Every call that makes or runs a translator runs on the server's one worker thread
(batcher.py), but load() before the server starts: engines and the translators' cache are not
used from two threads at once; what the event loop calls (check, items, info) reads only the
hparams.
"""

import collections
import dataclasses
import secrets

from t2t_lite.decoding.alignment import resolve_layer
from t2t_lite.decoding.decode import alignments_of, score_pairs
from t2t_lite.decoding.inputs import check_utf8, max_input_tokens
from t2t_lite.decoding.scoring import NORMALIZATIONS
from t2t_lite.export.engines import make_engine, refusal
from t2t_lite.utils.errors import UserError

# Translators kept for the option sets last used (each holds its compiled search).
TRANSLATORS_KEPT = 8
SAMPLING_OPTIONS = ("sampling_topk", "sampling_topp", "sampling_temperature")


@dataclasses.dataclass(frozen=True)
class Options:
    """A request's decoding options, the decoder's flags of the same names (None: the model's
    hparams); `seed` seeds sampling (None: a new one, returned with the outputs), item i of a
    request being line i + 1 of the decoder's --decode_from_file with --random_seed=seed."""

    beam_size: int = None
    alpha: float = None
    extra_length: int = None
    min_length: int = None
    n_best: int = None
    sampling_topk: int = None
    sampling_topp: float = None
    sampling_temperature: float = None
    seed: int = None
    with_alignments: bool = False
    attention: bool = False

    @property
    def sampling(self):
        return any(getattr(self, name) is not None for name in SAMPLING_OPTIONS)

    def search_key(self):
        """What chooses the translator: all but the seed and what is asked of the outputs."""
        return dataclasses.replace(self, seed=None, n_best=None, with_alignments=False,
                                   attention=False)


@dataclasses.dataclass
class Item:
    """One input of a request: its token ids or why it cannot be translated, and its line
    number (1, 2, ... in its request) for sampling's streams."""

    text: str
    tokens: list = None
    error: str = ""
    number: int = 1


class ServedModel:
    """The model of `runner` (a t2t_lite.runner.Runner) on `engine`, served as `name`."""

    def __init__(self, name, runner, engine, checkpoint_path=None, quantization="float32",
                 batch_size=64):
        self.name = name
        self.runner = runner
        self.engine = make_engine(engine)
        self.quantization = quantization
        self.batch_size = batch_size
        self.trained = runner.trained_model(checkpoint_path)
        self._translators = collections.OrderedDict()

    @property
    def problem(self):
        return self.runner.problem

    @property
    def vocabulary(self):
        return self.runner.vocabulary

    def load(self):
        """Restores the model and makes the default translator: what can fail (a missing or
        damaged checkpoint, a missing engine package) fails here, before the server listens."""
        return self.translator(Options())

    def warm_up(self):
        """Translates one input, so that the first request does not wait for the search to be
        compiled."""
        first_ids = list(range(2, min(6, self.vocabulary.size)))  # past PAD and EOS
        self.translator(Options()).translate_tokens([first_ids])

    def info(self):
        """What /models says of this model."""
        return {"name": self.name, "model_dir": str(self.runner.model_dir.path),
                "problem": self.problem.name, "engine": self.engine.name,
                "is_parser": self.problem.search_constraint(self.vocabulary) is not None,
                "vocabulary": {"kind": type(self.vocabulary).__name__,
                               "size": self.vocabulary.size},
                "max_input_tokens": max_input_tokens(self.runner.hparams),
                "capabilities": [name for name in ("n_best", "attention", "sampling")
                                 if self.engine.capabilities.has(name)],
                "hparams": self.runner.hparams.to_dict()}

    def check(self, options):
        """UserError for options this model cannot run, before the request is queued."""
        from t2t_lite.config import HParams

        for name in ("beam_size", "alpha", "extra_length", "min_length"):
            value = getattr(options, name)
            wrong = value is not None and HParams.out_of_range(name, value)
            if wrong:
                raise UserError(f"{name} {wrong}, got {value}")
        capabilities = self.engine.capabilities
        if options.sampling and not capabilities.has("sampling"):
            raise UserError(refusal(self.engine.name, "sampling", "sampling"))
        if options.sampling and options.beam_size not in (None, 1):
            raise UserError("sampling draws each token instead of searching: drop beam_size")
        if options.seed is not None and not options.sampling:
            raise UserError("seed seeds sampling: give sampling_topk, sampling_topp or "
                            "sampling_temperature too")
        if options.n_best is not None and options.n_best < 1:
            raise UserError(f"n_best must be positive, got {options.n_best}")
        if (options.n_best or 1) > 1 and not options.sampling:
            if not capabilities.has("n_best"):
                raise UserError(refusal(self.engine.name, "n_best", "n_best",
                                        unless=", unless sampling"))
            beam = options.beam_size or self.runner.hparams.beam_size
            if options.n_best > beam:
                raise UserError(f"n_best={options.n_best} needs beam_size={options.n_best} or "
                                "more: the beam holds the hypotheses")
        if options.attention and not capabilities.has("attention"):
            raise UserError(refusal(self.engine.name, "attention", "attention"))
        _sampling(options)  # a sampling setting out of range fails here

    def with_seed(self, options):
        """options, with a seed drawn now if sampling without one."""
        if options.sampling and options.seed is None:
            return dataclasses.replace(options, seed=secrets.randbelow(2**32))
        return options

    def batch_key(self, options):
        """Requests of equal keys may be translated in one batch (batcher.py): the same model
        and options. CTranslate2 seeds its sampling per batch, so its samples run alone."""
        if options.sampling and self.engine.name == "ctranslate2":
            return None
        return (self.name, options)

    def translator(self, options):
        """The translator of options' search settings, made once and kept."""
        key = options.search_key()
        if key in self._translators:
            self._translators.move_to_end(key)
            return self._translators[key]
        translator = make_engine(self.engine.name).translator(
            self.trained, self.runner.decoding_hparams(
                beam_size=options.beam_size, alpha=options.alpha,
                extra_length=options.extra_length, min_length=options.min_length),
            self.batch_size, self.quantization, _sampling(options))
        self._translators[key] = translator
        while len(self._translators) > TRANSLATORS_KEPT:
            self._translators.popitem(last=False)
        return translator

    def items(self, texts):
        """[Item] of each text: its ids, or why it cannot be translated (empty, not encodable,
        longer than the model reads: the decoder would cut it; a server says so)."""
        limit = max_input_tokens(self.runner.hparams)
        items = []
        for number, text in enumerate(texts, 1):
            item = Item(text, number=number)
            try:
                if not text.strip():
                    raise UserError("an empty input")
                check_utf8(text)
                item.tokens = self.vocabulary.encode(text)
                if len(item.tokens) > limit:
                    raise UserError(f"the input has {len(item.tokens)} tokens, more than the "
                                    f"{limit} the model reads")
            except UserError as error:
                item.error, item.tokens = str(error), None
            items.append(item)
        return items

    def translate(self, items, options):
        """A result for each Item (all without errors) translated with `options` (its seed
        given): {"output", "score"} of the best, the postprocessed text as the decoder prints
        it, and as asked "n_best" ([{"output", "score"}], best first), "alignment" (Pharaoh;
        n-best entries get theirs) and "attention" (of each output)."""
        translator = self.translator(options)
        if options.sampling:
            translator.sampling = dataclasses.replace(translator.sampling, seed=options.seed)
        token_lists = [item.tokens for item in items]
        numbers = [item.number for item in items]
        n = options.n_best or 1
        if n == 1:
            candidates = [[t] for t in translator.translate_tokens(token_lists,
                                                                  line_numbers=numbers)]
        else:
            candidates = translator.translate_n_best(token_lists, n, line_numbers=numbers)
        aligned = (alignments_of(translator, token_lists, candidates)
                   if options.with_alignments else None)
        attention = self._attention(translator, token_lists, candidates) if options.attention \
            else None
        results = []
        for i, (item, translations) in enumerate(zip(items, candidates)):
            entries = []
            for k, translation in enumerate(translations):
                entry = {"output": self.problem.postprocess(item.text, translation.text).text,
                         "score": translation.score}
                if aligned is not None:
                    entry["alignment"] = aligned[i][k]
                if attention is not None:
                    entry["attention"] = attention[i][k]
                entries.append(entry)
            result = dict(entries[0])
            if options.n_best is not None:
                result["n_best"] = entries
            results.append(result)
        return results

    def _attention(self, translator, token_lists, candidates):
        """For each output of each input, the heat map the web page draws: the source and
        output tokens (EOS's last) and the encoder-decoder attention of the layer that aligns
        (the penultimate; t2t_lite.decoding.alignment), averaged over its heads."""
        from t2t_lite.decoding.attention import attention_weights

        layer = resolve_layer(None, translator.hparams.num_decoder_layers)
        sources, targets = [], []
        for tokens, translations in zip(token_lists, candidates):
            for translation in translations:
                sources.append(tokens)
                targets.append(self.vocabulary.encode_target(translation.text))
        maps = iter({"source_tokens": list(record.source_pieces),
                     "output_tokens": list(record.target_pieces),
                     "weights": record.encoder_decoder[layer].mean(axis=0).round(4).tolist()}
                    for record in attention_weights(translator, sources, targets))
        return [[next(maps) for _ in translations] for translations in candidates]

    def score(self, sources, targets, normalize="none"):
        """[(score, token log-probabilities, error)] of each pair (the decoder's --score)."""
        if normalize not in NORMALIZATIONS:
            raise UserError(f"normalize must be one of {', '.join(NORMALIZATIONS)}, got "
                            f"{normalize!r}")
        return score_pairs(self.load(), sources, targets, normalize)


def _sampling(options):
    """The Sampling of options' settings (seed 0: translate sets each batch's), or None; a
    UserError for a setting out of range."""
    if not options.sampling:
        return None
    from t2t_lite.decoding.sampling import Sampling

    given = {"top_k": options.sampling_topk, "top_p": options.sampling_topp,
             "temperature": options.sampling_temperature}
    return Sampling(**{k: v for k, v in given.items() if v is not None})
