"""t2t-lite-serve under load, against the file decoder: sentences/s and request latency.

The same source lines are translated by `t2t-lite-decoder --decode_from_file` (its own count of
the translation, model loading and tracing excluded) and by a t2t-lite-serve process on
127.0.0.1 that CLIENTS threads of this script keep busy, each sending requests of
--inputs_per_request lines, one after the other, until every line was sent --passes times.
The server runs twice: batching across requests as it does by default, and one request at a
time (--max_batch_tokens=1: no request joins another's batch). Each server is warmed up (a
pass of requests before the timing), and its rate counts the timed pass alone; latency is each
request's, from sending to the whole answer. Run it alone: it measures time.

    python benchmarks/serve_load.py --model_dir /tmp/t2t_demo \\
        --record benchmarks/results/serving/load.json
"""

import argparse
import concurrent.futures
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import record  # noqa: E402


def demo_lines(count, seed=1):
    """Lines like the demo's test set: 1-20 random digits."""
    rng = random.Random(seed)
    return [" ".join(str(rng.randrange(10)) for _ in range(rng.randint(1, 20)))
            for _ in range(count)]


def decoder_rate(args, lines):
    """The file decoder's sentences/s over `lines`, as it logs it."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "sources.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(f"{line}\n" for line in lines)
        result = subprocess.run(
            ["t2t-lite-decoder", f"--model_dir={args.model_dir}", f"--engine={args.engine}",
             f"--decode_from_file={path}", f"--decode_to_file={path}.out",
             f"--batch_size={args.batch_size}"],
            capture_output=True, text=True, check=True)
    return float(re.search(r"\(([\d.]+) sentences/s\)", result.stderr).group(1))


class Server:
    def __init__(self, args, *flags):
        self.process = subprocess.Popen(
            ["t2t-lite-serve", f"--model_dir={args.model_dir}", f"--engine={args.engine}",
             "--port=0", f"--batch_size={args.batch_size}", *flags],
            stderr=subprocess.PIPE, text=True)
        self.url = None
        for line in self.process.stderr:
            found = re.search(r"at (http://127\.0\.0\.1:\d+/)", line)
            if found:
                self.url = found.group(1)
                break
        threading.Thread(target=lambda: self.process.stderr.read(), daemon=True).start()
        while not self.get("healthz"):
            time.sleep(0.2)

    def get(self, path):
        try:
            with urllib.request.urlopen(self.url + path, timeout=60) as response:
                return response.status == 200
        except (urllib.error.URLError, ConnectionError):
            return False

    def translate(self, inputs):
        """(seconds, status) of one request."""
        body = json.dumps({"inputs": inputs}).encode("utf-8")
        request = urllib.request.Request(self.url + "translate", data=body,
                                         headers={"Content-Type": "application/json"})
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=300) as response:
                response.read()
                status = response.status
        except urllib.error.HTTPError as error:
            status = error.code
        return time.perf_counter() - start, status

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=120)


def load(server, lines, clients, per_request):
    """(sentences/s, latencies, statuses) of sending `lines` in requests of per_request lines
    from `clients` threads."""
    requests = [lines[i:i + per_request] for i in range(0, len(lines), per_request)]
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        answers = list(pool.map(server.translate, requests))
    elapsed = time.perf_counter() - start
    return len(lines) / elapsed, [s for s, _ in answers], [status for _, status in answers]


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--engine", default="tensorflow")
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--inputs_per_request", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--batch_size", type=int, default=64)
    record.add_record_flag(parser, example="serving/load.json")
    args = parser.parse_args()
    lines = demo_lines(args.lines)
    rows = [["t2t-lite-decoder --decode_from_file", "", "", round(decoder_rate(args, lines), 1),
             None, None, None]]
    for name, flags in (("t2t-lite-serve, batching across requests", ()),
                        ("t2t-lite-serve, a request at a time", ("--max_batch_tokens=1",))):
        server = Server(args, *flags)
        try:
            for per_request in args.inputs_per_request:
                load(server, lines[: args.clients * 20], args.clients, per_request)  # warm-up
                rate, latencies, statuses = load(server, lines, args.clients, per_request)
                rows.append([name, args.clients, per_request, round(rate, 1),
                             round(1000 * percentile(latencies, 0.5), 1),
                             round(1000 * percentile(latencies, 0.99), 1),
                             sum(status != 200 for status in statuses)])
                print(rows[-1], flush=True)
        finally:
            server.stop()
    columns = ["translated by", "clients", "inputs per request", {"name": "sentences/s",
               "digits": 1}, {"name": "latency p50 (ms)", "digits": 1},
               {"name": "latency p99 (ms)", "digits": 1}, "answers other than 200"]
    print("| " + " | ".join(c if isinstance(c, str) else c["name"] for c in columns) + " |")
    for row in rows:
        print("| " + " | ".join("" if v is None else str(v) for v in row) + " |")
    if args.record:
        record.write_record(
            args.record, "t2t-lite-serve under load and the file decoder", columns, rows,
            notes=[f"{args.lines} lines of 1-20 random digits (the demo's kind), translated by "
                   f"{args.model_dir} on the {args.engine} engine, beam search as its hparams "
                   f"say; {args.clients} client threads on the same machine"])


if __name__ == "__main__":
    main()
