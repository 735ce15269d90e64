"""A benchmark's table as a record of the results pages (docs/results_pages.py reads them):
`--record benchmarks/results/TOPIC/NAME.json` on a script writes its table there with what
the page shows beside it, taken from the run itself: the command, the date, the machine, the
versions of the libraries it measured and the load average before and after.

A script that measures one configuration per run (backends.py: one backend, one precision)
passes `extend=True` to add its rows to the record already there when the columns agree, so
that a table made of several runs is one record; its date, load and command then list the runs,
its title and source stay the record's own, its notes gain those of a run not there yet, and its
machine and software list a run's only where they differ from the record's.
Any other record is replaced: the pages show today's numbers, and git keeps the old ones.
"""

import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import sys
from pathlib import Path

LIBRARIES = ("tensorflow", "keras", "jax", "jaxlib", "ctranslate2", "torch", "transformers",
             "sacrebleu")
STARTED = datetime.datetime.now(datetime.timezone.utc)
LOAD_BEFORE = os.getloadavg()[0]


def add_record_flag(parser, flag="--record", table="the table", example="TOPIC/NAME.json"):
    """`flag` PATH: also write `table` as a results record (a script with several tables
    gives each its own flag)."""
    parser.add_argument(flag, metavar="PATH", help=f"also write {table} as a results record, "
                        f"e.g. benchmarks/results/{example} (docs/results_pages.py)")


def cpu_model():
    """The CPU's model name, as /proc/cpuinfo gives it (else what `platform` knows), with its
    family and model numbers: cloud VMs may name every generation alike ("AMD EPYC"), and one
    VM of that name ran this project's 30-minute training 1.8 times faster than another."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            first_cpu = f.read().split("\n\n")[0].splitlines()
    except OSError:
        first_cpu = []
    fields = {key.strip(): value.strip()
              for key, value in (line.split(":", 1) for line in first_cpu if ":" in line)}
    if "model name" not in fields:
        return platform.processor() or platform.machine()
    numbers = [f"{key} {fields[key]}" for key in ("cpu family", "model") if key in fields]
    return fields["model name"] + (f" ({', '.join(numbers)})" if numbers else "")


def machine():
    """The CPU's model name, its cores and the memory."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu_model()}, {os.cpu_count()} cores, {memory:.0f} GiB"


def software():
    """The installed versions of the libraries a benchmark may measure."""
    versions = []
    for name in LIBRARIES:
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return ", ".join([f"Python {platform.python_version()}"] + versions)


def dumps(record):
    """The record as JSON that reads as a table in a diff: one field, column or row a line."""
    lines = []
    for key, value in record.items():
        if key in ("columns", "rows", "notes") and value:
            items = ",\n".join("  " + json.dumps(item, ensure_ascii=False) for item in value)
            lines.append(f" {json.dumps(key)}: [\n{items}\n ]")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def write_record(path, title, columns, rows, notes=(), chart=None, gpu=None, extend=False):
    """Write (or extend, see the module's docstring) the record at `path`, atomically."""
    path = Path(path)
    now = datetime.datetime.now(datetime.timezone.utc)
    record = {"title": title, "script": f"benchmarks/{Path(sys.argv[0]).name}",
              "command": "python " + shlex.join([f"benchmarks/{Path(sys.argv[0]).name}"]
                                                + sys.argv[1:]),
              "date": f"{STARTED:%Y-%m-%d %H:%M}-{now:%H:%M} UTC",
              "machine": machine() + (f", {gpu}" if gpu else ", no GPU"),
              "software": software(),
              "load": f"load average {LOAD_BEFORE:.2f} before, {os.getloadavg()[0]:.2f} after",
              "source": "written by the script", "columns": list(columns),
              "rows": [list(row) for row in rows], "notes": list(notes)}
    if chart:
        record["chart"] = chart
    if extend and path.is_file():
        previous = json.loads(path.read_text(encoding="utf-8"))
        if previous.get("columns") == record["columns"] and previous.get("script") == record[
                "script"]:
            record["rows"] = previous["rows"] + record["rows"]
            for field in ("date", "load", "command"):
                record[field] = f"{previous[field]}; {record[field]}"
            # The record's own title and source stay (a person may have written them); the
            # machine and software are listed again only when this run's differ.
            for field in ("title", "source"):
                record[field] = previous.get(field, record[field])
            earlier = previous.get("notes", [])  # each run's notes once, the earlier first
            record["notes"] = earlier + [note for note in record["notes"] if note not in earlier]
            for field in ("machine", "software"):
                if previous.get(field) and previous[field] != record[field]:
                    record[field] = f"{previous[field]}; {record[field]}"
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(dumps(record), encoding="utf-8")
    temporary.replace(path)
    print(f"record written: {path}", file=sys.stderr)
