"""The JSON API's bodies, as pydantic models: FastAPI validates requests against them (strict
types; an unknown option is refused, so that a typo is not silently ignored) and writes the
OpenAPI schema from them. Field names are the SavedModel's (`inputs`, `outputs`, `scores`,
`errors`) and the decoder's flags'."""

import math
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from t2t_lite.serving.served_model import Options

_STRICT = ConfigDict(extra="forbid", strict=True)


class TranslateRequest(BaseModel):
    model_config = _STRICT

    inputs: list[str] = Field(description="texts to translate (for parsing: sentences)")
    model: Optional[str] = Field(None, description="the model's name (default: the first)")
    beam_size: Optional[int] = Field(None, description="1: greedy (default: the model's)")
    alpha: Optional[float] = Field(None, description="length penalty exponent")
    extra_length: Optional[int] = Field(None, description="outputs have at most input length "
                                        "+ this many tokens")
    min_length: Optional[int] = Field(None, description="outputs have at least this many "
                                      "tokens before EOS")
    n_best: Optional[int] = Field(None, description="also return the n best hypotheses of "
                                  "each input (or n samples), best first")
    sampling_topk: Optional[int] = Field(None, description="sample from the k most probable "
                                         "tokens (0: all) instead of searching")
    sampling_topp: Optional[float] = Field(None, description="sample from the nucleus of mass p")
    sampling_temperature: Optional[float] = Field(None, description="sample at this temperature")
    seed: Optional[int] = Field(None, description="with sampling: repeatable samples (input i "
                                "draws as line i + 1 of the decoder's --random_seed)")
    with_alignments: bool = Field(False, description="return each output's Pharaoh alignment")
    attention: bool = Field(False, description="return each output's encoder-decoder attention "
                            "(the aligning layer's, averaged over heads)")

    def options(self):
        """The Options fields of this request."""
        return {name: getattr(self, name) for name in Options.__dataclass_fields__}


class Attention(BaseModel):
    source_tokens: list[str]
    output_tokens: list[str]
    weights: list[list[float]] = Field(description="[output token][source token]")


class Candidate(BaseModel):
    output: str
    score: float
    alignment: Optional[str] = None
    attention: Optional[Attention] = None


class TranslateResponse(BaseModel):
    model: str
    outputs: list[str] = Field(description="the best output of each input, postprocessed as "
                               "the decoder prints it (\"\" where errors has a reason)")
    scores: list[float] = Field(description="its length-penalized log-probability (0 where "
                                "errors has a reason)")
    errors: list[str] = Field(description="why an input was not translated, \"\" for the others")
    n_best: Optional[list[list[Candidate]]] = None
    alignments: Optional[list[str]] = None
    attention: Optional[list[Optional[Attention]]] = None
    seed: Optional[int] = Field(None, description="the sampling seed used (give it again to "
                                "draw the same samples)")


class ScoreRequest(BaseModel):
    model_config = _STRICT

    sources: list[str]
    targets: list[str]
    model: Optional[str] = None
    normalize: str = Field("none", description="none: the log-probability; length: per token; "
                           "gnmt: divided by the search's length penalty")


class ScoreResponse(BaseModel):
    model: str
    scores: list[Optional[float]] = Field(description="null where errors has a reason")
    token_log_probs: list[list[float]] = Field(description="each target token's, EOS's last")
    errors: list[str]


def translate_response(model_name, items, results, options):
    """The TranslateResponse fields for each Item, taking the results of those without errors
    from `results` in order."""
    answer = {"model": model_name, "outputs": [], "scores": [], "errors": []}
    extra = {name: [] for name, wanted in (("n_best", options.n_best is not None),
                                           ("alignments", options.with_alignments),
                                           ("attention", options.attention)) if wanted}
    for item in items:
        result = {"output": "", "score": 0.0, "n_best": [], "alignment": "",
                  "attention": None} if item.error else next(results)
        answer["outputs"].append(result["output"])
        answer["scores"].append(result["score"])
        answer["errors"].append(item.error)
        for name, key in (("n_best", "n_best"), ("alignments", "alignment"),
                          ("attention", "attention")):
            if name in extra:
                extra[name].append(result[key])
    if options.sampling:
        answer["seed"] = options.seed
    return {**answer, **extra}


def score_response(model_name, scored):
    return {"model": model_name,
            "scores": [None if math.isnan(score) else score for score, _, _ in scored],
            "token_log_probs": [log_probs for _, log_probs, _ in scored],
            "errors": [error for _, _, error in scored]}


def one_line(errors):
    """(HTTP status, one-line reason) of pydantic's validation errors of a body: 400 for a body
    that is not JSON, 422 for one that does not fit the schema."""
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
    kind = first.get("type", "")
    if kind == "json_invalid":
        return 400, f"the body is not valid JSON ({first.get('msg', '')})"
    if kind == "extra_forbidden":
        return 422, f"unknown option '{where}' (see /openapi.json for the options)"
    if not where:
        return 422, "the body must be a JSON object (see /openapi.json)"
    if kind == "missing":
        return 422, f"'{where}' is required"
    return 422, f"{where}: {first.get('msg', 'invalid')}"
