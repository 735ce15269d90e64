"""t2t-lite-serve: its API gives the decoder CLI's translations, scores, n-best lists, samples
and alignments (TensorFlow and CTranslate2 engines); refused requests get a 4xx and one line;
an input that cannot be translated gets its reason and the others their translations; the
batcher groups concurrent requests (counted, not timed). The server process itself, under
load, in a browser and on SIGTERM, is test_serve_process.py's."""

import json
import threading

import pytest
from fastapi.testclient import TestClient

from t2t_lite.cli import decoder
from t2t_lite.runner import Runner
from t2t_lite.serving.app import Limits, create_app
from t2t_lite.serving.batcher import Batcher, QueueFull
from t2t_lite.serving.served_model import ServedModel

SOURCES = ["1 2 3", "7 7 0 5 1 2", "4", "9 8 7 6 5 4 3 2", "6 2"]


@pytest.fixture(scope="module")
def client(trained_reverse):
    """The trained demo served twice: on TensorFlow as `tf`, on CTranslate2 as `ct2`."""
    model_dir = str(trained_reverse.runner.model_dir.path)
    models = {name: ServedModel(name, Runner.from_model_dir(model_dir), engine)
              for name, engine in (("tf", "tensorflow"), ("ct2", "ctranslate2"))}
    for model in models.values():
        model.load()
    app = create_app(models, Batcher(), Limits(max_body_bytes=4000, max_items=20))
    with TestClient(app) as client:
        client.model_dir = model_dir
        yield client


def decoder_lines(client, tmp_path, *flags, sources=SOURCES):
    """The lines the decoder CLI writes for `sources` with `flags`."""
    source_file, output_file = tmp_path / "sources.txt", tmp_path / "outputs.txt"
    source_file.write_text("".join(f"{line}\n" for line in sources), encoding="utf-8")
    decoder.main([f"--model_dir={client.model_dir}", f"--decode_from_file={source_file}",
                  f"--decode_to_file={output_file}", *flags])
    return output_file.read_text(encoding="utf-8").splitlines()


def post(client, path, body, status=200):
    response = client.post(path, content=json.dumps(body))  # ASCII, "\ud800" escaped
    assert response.status_code == status, response.text
    return response.json()


def test_translations_equal_the_decoders(client, tmp_path):
    """Beam search's n best with alignments on TensorFlow, greedy on CTranslate2, samples by a
    seed: the decoder's outputs, scores (to its 6 decimals) and alignments."""
    rows = [line.split("\t") for line in decoder_lines(
        client, tmp_path, "--n_best=2", "--with_alignments")]
    answer = post(client, "/translate", {"inputs": SOURCES, "n_best": 2,
                                         "with_alignments": True, "model": "tf"})
    served = [(c["output"], f"{c['score']:.6f}", c["alignment"])
              for candidates in answer["n_best"] for c in candidates]
    assert served == [tuple(row) for row in rows]
    best = post(client, "/translate", {"inputs": SOURCES})  # the first model: tf
    assert best["outputs"] == [row[0] for row in rows[::2]] == answer["outputs"]
    assert best["outputs"][0] == "3 2 1"  # the model learned to reverse
    assert best["errors"] == [""] * len(SOURCES)

    assert post(client, "/translate", {"inputs": SOURCES, "model": "ct2", "beam_size": 1})[
        "outputs"] == decoder_lines(client, tmp_path, "--engine=ctranslate2", "--beam_size=1")

    sampled = decoder_lines(client, tmp_path, "--sampling_temperature=2.0", "--random_seed=7",
                            "--n_best=3")
    answer = post(client, "/translate", {"inputs": SOURCES, "sampling_temperature": 2.0,
                                         "seed": 7, "n_best": 3})
    assert answer["seed"] == 7
    assert [f"{c['output']}\t{c['score']:.6f}" for candidates in answer["n_best"]
            for c in candidates] == sampled
    assert len(set(sampled)) > len(SOURCES)  # at temperature 2 the samples differ


def test_scores_equal_the_decoders(client, tmp_path):
    pairs = ["1 2 3\t3 2 1", "1 2 3\t1 2 3", "\t5", "4 5\t5 4"]
    lines = decoder_lines(client, tmp_path, "--score", "--score_normalize=length",
                          sources=pairs)
    answer = post(client, "/score", {"sources": [p.split("\t")[0] for p in pairs],
                                     "targets": [p.split("\t")[1] for p in pairs],
                                     "normalize": "length"})
    served = [("nan" if score is None else f"{score:.6f}",
               " ".join(f"{p:.6f}" for p in log_probs), error) for score, log_probs, error in
              zip(answer["scores"], answer["token_log_probs"], answer["errors"])]
    assert served == [tuple(line.split("\t")) for line in lines]
    assert answer["errors"][2] == "an empty source or target"


def test_an_input_that_cannot_be_translated_keeps_the_others(client):
    inputs = ["1 2 3", "", "5 x", " ".join(["3"] * 200), "6 2", "1 \ud800"]
    answer = post(client, "/translate", {"inputs": inputs, "attention": True,
                                         "with_alignments": True})
    assert answer["outputs"][0] == "3 2 1" and answer["outputs"][4] == "2 6"
    assert [bool(e) for e in answer["errors"]] == [False, True, True, True, False, True]
    assert answer["errors"][5] == "not valid UTF-8"  # a lone surrogate, which JSON can hold
    assert answer["errors"][1] == "an empty input"
    assert "expected integers" in answer["errors"][2]
    assert "200 tokens, more than the" in answer["errors"][3]
    assert answer["outputs"][1:4] == ["", "", ""] and answer["scores"][1:4] == [0.0] * 3
    attention = answer["attention"][0]  # the heat map of "3 2 1": rows output, columns source
    assert attention["source_tokens"][:3] == ["1", "2", "3"]
    assert attention["output_tokens"][:3] == ["3", "2", "1"]
    weights = attention["weights"]
    assert len(weights) == 4 and all(len(row) == 4 and abs(sum(row) - 1) < 1e-3
                                     for row in weights)
    # The alignment is the heat map's most attended source token of each output token.
    assert answer["alignments"][0] == " ".join(
        f"{max(range(3), key=row.__getitem__)}-{j}" for j, row in enumerate(weights[:3]))
    assert answer["attention"][1] is None and answer["alignments"][1] == ""


@pytest.mark.parametrize("body, status, reason", [
    ("{not json", 400, "not valid JSON"),
    ("[]", 422, "body"),
    (json.dumps({"inputs": "1 2 3"}), 422, "inputs: Input should be a valid list"),
    (json.dumps({"inputs": ["1"], "beam_size": "4"}), 422, "beam_size"),
    (json.dumps({"inputs": ["1"], "beam_sise": 4}), 422, "unknown option 'beam_sise'"),
    (json.dumps({"inputs": ["1"] * 21}), 413, "21 inputs, more than the 20"),
    (json.dumps({"inputs": ["1 2 " * 1000]}), 413, "more than 4000 bytes"),
    (json.dumps({"inputs": ["1"], "model": "big"}), 404, "no model 'big'"),
    (json.dumps({"inputs": ["1"], "n_best": 5}), 422, "n_best=5 needs beam_size=5"),
    (json.dumps({"inputs": ["1"], "n_best": 2, "model": "ct2"}), 422,
     "n_best needs the tensorflow or jax engine, unless sampling"),
    (json.dumps({"inputs": ["1"], "attention": True, "model": "ct2"}), 422,
     "CTranslate2 does not return attention weights"),
    (json.dumps({"inputs": ["1"], "sampling_topp": 1.5}), 422, "sampling_topp must be in (0, 1]"),
    (json.dumps({"inputs": ["1"], "seed": 3}), 422, "seed seeds sampling"),
    (json.dumps({"sources": ["1"], "targets": []}), 422, "1 sources but 0 targets"),
])
def test_refused_requests_get_a_4xx_and_one_line(client, body, status, reason):
    path = "/score" if "sources" in body else "/translate"
    response = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert reason in detail and "\n" not in detail


def test_models_health_schema_and_page(client):
    models = client.get("/models").json()["models"]
    assert [(m["name"], m["engine"], m["problem"]) for m in models] == [
        ("tf", "tensorflow", "test_short_reverse"), ("ct2", "ctranslate2", "test_short_reverse")]
    assert models[0]["vocabulary"]["size"] == 12 and models[0]["hparams"]["d_model"] == 64
    assert "attention" in models[0]["capabilities"] and "attention" not in models[1][
        "capabilities"]
    assert client.get("/healthz").json() == {"status": "ok", "models": ["tf", "ct2"]}
    schema = client.get("/openapi.json").json()
    request = schema["components"]["schemas"]["TranslateRequest"]
    assert {"inputs", "model", "beam_size", "n_best", "seed"} <= set(request["properties"])
    assert request["additionalProperties"] is False
    page = client.get("/").text
    assert 'id="heatmap"' in page and "http" not in page.split("<script>")[1]  # no CDN


def counting_run(calls):
    def run(items):
        calls.append(list(items))
        return [item * 10 for item in items]
    return run


def test_the_batcher_groups_requests_of_one_key_up_to_its_tokens():
    """Jobs queued while the worker is busy join one batch by key, up to max_batch_tokens."""
    batcher = Batcher(max_batch_tokens=10, max_wait_ms=0, max_queued_items=100)
    calls, gate = [], threading.Event()
    batcher.submit(None, [0], 1, lambda items: gate.wait() and [0])  # holds the worker
    batcher.start()
    jobs = [batcher.submit("a", [1, 2], 4, counting_run(calls)),
            batcher.submit("b", [3], 4, counting_run(calls)),
            batcher.submit("a", [4], 4, counting_run(calls)),
            batcher.submit("a", [5], 4, counting_run(calls))]  # over 10 tokens with the two
    gate.set()
    assert [job.future.result(timeout=10) for job in jobs] == [[10, 20], [30], [40], [50]]
    batcher.close()
    assert calls == [[1, 2, 4], [3], [5]]
    assert batcher.batches == 4 and batcher.jobs_run == 5


def test_the_batcher_bounds_its_queue_and_drops_cancelled_jobs():
    batcher = Batcher(max_batch_tokens=10, max_wait_ms=0, max_queued_items=3)
    calls = []
    first = batcher.submit("a", [1, 2], 2, counting_run(calls))
    with pytest.raises(QueueFull, match="holds 2 inputs, the most it takes is 3"):
        batcher.submit("a", [3, 4], 2, counting_run(calls))
    assert batcher.cancel(first) and batcher.queued_items == 0
    failing = batcher.submit("b", [5], 1, lambda items: 1 / 0)
    kept = batcher.submit("c", [6], 1, counting_run(calls))
    batcher.start()
    with pytest.raises(ZeroDivisionError):
        failing.future.result(timeout=10)
    assert kept.future.result(timeout=10) == [60]  # the worker goes on after a failure
    batcher.close()
    assert calls == [[6]] and first.future.cancelled()
