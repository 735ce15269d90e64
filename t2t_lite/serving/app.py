"""The FastAPI application of t2t-lite-serve: the JSON API (its OpenAPI schema at
/openapi.json), the web page at /, limits, and one-line reasons for every refused request.

FastAPI validates each body against the models in api.py (unknown options and wrong types are
refused, not ignored) and writes the schema from them; the work runs on batcher.py's worker.
"""

import asyncio
import dataclasses
import importlib.resources
import logging
import time

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse

from t2t_lite.serving import api
from t2t_lite.serving.batcher import QueueFull
from t2t_lite.serving.served_model import Options
from t2t_lite.utils.errors import UserError

logger = logging.getLogger("t2t_lite")


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one request may ask (t2t-lite-serve's flags of the same names)."""

    max_body_bytes: int = 1 << 20
    max_items: int = 256


class Refused(Exception):
    """A request refused as a whole: its HTTP status and one-line reason."""

    def __init__(self, status, reason, headers=None):
        super().__init__(reason)
        self.status, self.reason, self.headers = status, reason, headers


def create_app(models, batcher, limits=Limits(), latency_log=None):
    """The application serving `models` (name -> ServedModel, loaded), running their work on
    `batcher` (started and closed by the application's lifespan, which also warms each model
    up: /healthz says 503 until then)."""
    state = {"ready": False}
    latency_log = latency_log or LatencyLog()

    async def lifespan(app):
        batcher.start()
        warm_ups = [batcher.submit(None, [], 0, lambda _, m=m: [m.warm_up()]).future
                    for m in models.values()]
        asyncio.get_running_loop().run_in_executor(None, _ready_after, warm_ups, state)
        yield
        batcher.close()

    # No /docs page: FastAPI draws it with scripts from a CDN.
    app = FastAPI(title="t2t-lite-serve", lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Translations, n-best lists, samples, alignments, attention and "
                  "scores of t2t_lite models. Errors: {\"detail\": one line}.")
    app.add_middleware(JsonBodies, max_bytes=limits.max_body_bytes)

    @app.exception_handler(Refused)
    async def refused(request, error):
        return JSONResponse({"detail": error.reason}, error.status, headers=error.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request, error):
        status, reason = api.one_line(error.errors())
        return JSONResponse({"detail": reason}, status)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page():
        return (importlib.resources.files("t2t_lite.serving") / "page.html").read_text("utf-8")

    @app.get("/healthz", summary="200 once every model is loaded and warmed up, else 503")
    async def healthz():
        if not state["ready"]:
            raise Refused(503, "warming up", {"Retry-After": "1"})
        return {"status": "ok", "models": list(models)}

    @app.get("/models", summary="The models served, with their problem, hparams and vocabulary")
    async def list_models():
        return {"models": [model.info() for model in models.values()]}

    @app.post("/translate", response_model=api.TranslateResponse, response_model_exclude_none=True,
              summary="Translate texts (one result per input, in order)")
    async def translate(body: api.TranslateRequest, request: Request):
        start = time.perf_counter()
        model = _model(models, body.model)
        _check_count(len(body.inputs), limits)
        options = Options(**body.options())
        try:
            model.check(options)
        except UserError as error:
            raise Refused(422, str(error)) from None
        options = model.with_seed(options)
        items = model.items(body.inputs)
        todo = [item for item in items if not item.error]
        try:
            results = iter(await _run(request, batcher, model.batch_key(options), todo,
                                      sum(len(item.tokens) + 1 for item in todo),
                                      lambda batch: model.translate(batch, options))
                           if todo else [])
        except UserError as error:
            raise Refused(422, str(error)) from None
        answer = api.translate_response(model.name, items, results, options)
        latency_log.record(request, model.name, len(items), time.perf_counter() - start,
                           batcher)
        return answer

    @app.post("/score", response_model=api.ScoreResponse,
              summary="Score given translations (the decoder's --score)")
    async def score(body: api.ScoreRequest, request: Request):
        start = time.perf_counter()
        model = _model(models, body.model)
        if len(body.sources) != len(body.targets):
            raise Refused(422, f"{len(body.sources)} sources but {len(body.targets)} targets: "
                          "give one target per source")
        _check_count(len(body.sources), limits)
        try:
            model.check(Options())
            pairs = list(zip(body.sources, body.targets))
            scored = await _run(request, batcher, (model.name, "score", body.normalize), pairs,
                                sum(len(s) + len(t) for s, t in pairs) // 4 + len(pairs),
                                lambda batch: model.score([s for s, _ in batch],
                                                          [t for _, t in batch], body.normalize))
        except UserError as error:
            raise Refused(422, str(error)) from None
        latency_log.record(request, model.name, len(pairs), time.perf_counter() - start,
                           batcher)
        return api.score_response(model.name, scored)

    return app


def _ready_after(futures, state):
    try:
        for future in futures:
            future.result()
    except Exception as error:  # the server stays up, and /healthz says 503
        logger.error("warming up failed: %s", error)
        return
    state["ready"] = True
    logger.info("ready: every model is warmed up")


def _model(models, name):
    if name is None:
        return next(iter(models.values()))
    if name not in models:
        raise Refused(404, f"no model '{name}': this server serves {', '.join(models)}")
    return models[name]


def _check_count(count, limits):
    if count > limits.max_items:
        raise Refused(413, f"{count} inputs, more than the {limits.max_items} a request may "
                      "hold (--max_items): split them")


async def _run(request, batcher, key, items, tokens, run):
    """Runs `items` on the batcher's worker and returns their results; drops them if the
    client goes away before they start."""
    try:
        job = batcher.submit(key, items, tokens, run)
    except QueueFull as full:
        raise Refused(503, str(full), {"Retry-After": str(full.retry_after)}) from None
    waiting = asyncio.wrap_future(job.future)
    while True:
        done, _ = await asyncio.wait({waiting}, timeout=0.25)
        if done:
            return waiting.result()
        if await request.is_disconnected():
            batcher.cancel(job)
            raise Refused(499, "the client went away")


class LatencyLog:
    """A log line per request (its latency) and, every `every` seconds of traffic, one with the
    rate and latency percentiles since the last."""

    def __init__(self, every=30.0):
        self.every = every
        self.since = time.monotonic()
        self.latencies, self.items = [], 0

    def record(self, request, model, items, seconds, batcher):
        logger.info("%s %s %s: %d inputs in %.0f ms", request.method, request.url.path, model,
                    items, seconds * 1000)
        self.latencies.append(seconds)
        self.items += items
        now = time.monotonic()
        if now - self.since >= self.every:
            ordered = sorted(self.latencies)
            logger.info("served %d requests (%d inputs, %.1f inputs/s) in %.0f s: latency p50 "
                        "%.0f ms, p99 %.0f ms; %d batches so far; %d inputs queued",
                        len(ordered), self.items, self.items / (now - self.since),
                        now - self.since, 1000 * ordered[len(ordered) // 2],
                        1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
                        batcher.batches, batcher.queued_items)
            self.since, self.latencies, self.items = now, [], 0


class JsonBodies:
    """ASGI middleware: every body is read as JSON, whatever its Content-Type says (`curl -d`
    calls it a form), and a body over max_bytes (by its Content-Length, or as it arrives) is
    refused with 413 before it is held in memory."""

    def __init__(self, app, max_bytes):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        scope = dict(scope, headers=[(name, value) for name, value in scope["headers"]
                                     if name != b"content-type"]
                     + [(b"content-type", b"application/json")])
        too_large = JSONResponse(
            {"detail": f"the body has more than {self.max_bytes} bytes (--max_body_bytes)"}, 413)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await too_large(scope, receive, send)
        received = 0
        started = False

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _TooLarge()
            return message

        async def watched_send(message):
            nonlocal started
            started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, watched_send)
        except _TooLarge:
            if not started:
                await too_large(scope, receive, send)


class _TooLarge(Exception):
    pass
