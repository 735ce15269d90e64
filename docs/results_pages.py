"""The results pages: what t2t_lite measured, one page per topic, today's numbers only.

A topic is a page typed by hand, benchmarks/results/TOPIC.md (what is measured, how, and what
it shows), and its records, benchmarks/results/TOPIC/NAME.json: one table each, its numbers as
JSON numbers beside the machine, date, command and load that gave them (the format is
benchmarks/record.py's, which the benchmark scripts write with `--record`). A line
`{{ record NAME }}` on the page becomes the record's table and where it comes from;
`{{ chart NAME }}` a line chart of it (matplotlib, on the site only). So a number lives in one
place, its record: the pages' prose, the guides and the README refer to it instead of repeating
it, which tests/test_docs.py checks (`repeated_numbers`).

The site renders the topics in memory (docs/hooks.py); `python docs/results_pages.py` writes
them, all in one file, to benchmarks/RESULTS.md for readers of the repository, and
`--check` fails when that file is not what the records give (the tests run it).
"""

import argparse
import io
import json
import re
import sys

from markdown.extensions.toc import slugify  # MkDocs's own anchors (markdown: mkdocs needs it)
from reference_code import GENERATED_NOTE, ROOT

RESULTS_DIR = ROOT / "benchmarks" / "results"
RESULTS_MD = ROOT / "benchmarks" / "RESULTS.md"
MARKER = re.compile(r"^\{\{ (record|chart) ([\w.-]+) \}\}$")
REQUIRED = ("title", "script", "command", "date", "machine", "load", "source", "columns", "rows")
# A measured value: a fraction with three or more significant digits (56.1, 0.975, 38.40) or an
# integer of four or more digits that is not a round hundred (4,738): seen in two places, it is
# the same measurement written twice. Shorter ones (0.1, 2x, exit status 130), round counts
# (step 5,000) and percentages (shares the prose derives: 35.4%) are left out.
NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?![\w%]|\.\d|,\d{3})")
# A year, written without a comma as prose writes it ("Post & Vilar 2018"), is no step count.
YEAR = re.compile(r"(?<![\w.,])(?:19|20)\d\d(?![\w%]|[.,]\d)")


def topics():
    """The topics' names, in the order the site lists them (alphabetical)."""
    return sorted(path.stem for path in RESULTS_DIR.glob("*.md"))


def load_record(path):
    """The record at `path`, checked: every required field, every row as long as the columns.
    A ValueError names the file and what is wrong with it."""
    if not path.is_file():
        raise ValueError(f"a results page shows {path}, which does not exist")
    record = json.loads(path.read_text(encoding="utf-8"))
    missing = [key for key in REQUIRED if key not in record]
    if missing:
        raise ValueError(f"{path} lacks {', '.join(missing)}")
    for row in record["rows"]:
        if len(row) != len(record["columns"]):
            raise ValueError(f"{path}: the row {row} has {len(row)} cells for "
                             f"{len(record['columns'])} columns")
    return record


def column_name(column):
    return column if isinstance(column, str) else column["name"]


def cell(value, column):
    """A value as the table shows it: ints with thousands separators, floats with the column's
    digits, text as it is, a missing value empty."""
    if value is None:
        return ""
    if isinstance(value, bool) or isinstance(value, str):
        return str(value).replace("|", "\\|")
    if isinstance(value, int):
        return f"{value:,}"
    digits = column.get("digits") if isinstance(column, dict) else None
    return f"{value:,.{digits}f}" if digits is not None else f"{value:,}"


def table(record):
    """The record's Markdown table: numeric columns right-aligned."""
    columns = record["columns"]
    numeric = [all(isinstance(row[i], (int, float)) or row[i] is None for row in record["rows"])
               for i in range(len(columns))]
    lines = ["| " + " | ".join(column_name(c).replace("|", "\\|") for c in columns) + " |",
             "| " + " | ".join("---:" if n else "---" for n in numeric) + " |"]
    lines += ["| " + " | ".join(cell(value, column) for value, column in zip(row, columns))
              + " |" for row in record["rows"]]
    return lines


def provenance(record, topic, name):
    """Where the table's numbers come from, in one paragraph under it."""
    parts = [f"*{record['title']}.*"] + [note.rstrip(".") + "." for note in record.get("notes", [])]
    parts.append(f"Measured {record['date']} on {record['machine']}"
                 + (f" ({record['software']})" if record.get("software") else "")
                 + f"; {record['load']}.")
    parts.append(f"Command: `{record['command']}`.")
    parts.append(f"Record: `benchmarks/results/{topic}/{name}.json` ({record['source']}).")
    return " ".join(parts)


def chart_svg(record):
    """The record's `chart` (x, y and series columns) as an SVG line chart."""
    import matplotlib  # the viz extra, which the docs extra installs
    matplotlib.use("Agg")
    from matplotlib import pyplot

    spec = record["chart"]
    names = [column_name(c) for c in record["columns"]]
    x, y = names.index(spec["x"]), names.index(spec["y"])
    series = names.index(spec["series"]) if spec.get("series") else None
    curves = {}
    for row in record["rows"]:
        label = row[series] if series is not None else spec["y"]
        curves.setdefault(label, []).append((row[x], row[y]))
    figure, axes = pyplot.subplots(figsize=(6.4, 3.6))
    for label, points in curves.items():
        axes.plot(*zip(*points), marker="o", markersize=3, label=label)
    axes.set_xlabel(spec.get("x_label", spec["x"]))
    axes.set_ylabel(spec.get("y_label", spec["y"]))
    axes.grid(alpha=0.3)
    if series is not None:
        axes.legend()
    figure.tight_layout()
    svg = io.StringIO()
    figure.savefig(svg, format="svg", metadata={"Date": None})
    pyplot.close(figure)
    return svg.getvalue()


def render(topic, charts):
    """TOPIC.md with its markers replaced; {name: svg} of its charts when `charts` (the site),
    else the charts left out (RESULTS.md, which links to the site's pictures instead)."""
    lines, pictures = [], {}
    text = (RESULTS_DIR / f"{topic}.md").read_text(encoding="utf-8")
    for line in text.splitlines():
        match = MARKER.match(line.strip())
        if not match:
            lines.append(line)
            continue
        kind, name = match.groups()
        record = load_record(RESULTS_DIR / topic / f"{name}.json")
        if kind == "record":
            lines += table(record) + ["", provenance(record, topic, name)]
        elif "chart" not in record:
            raise ValueError(f"benchmarks/results/{topic}.md charts {name!r}, whose record has "
                             f"no `chart`")
        elif charts:
            pictures[name] = chart_svg(record)
            lines.append(f"![{record['title']}]({topic}/{name}.svg)")
        else:
            # Named by its record: the table below a chart is often another record's.
            lines.append(f"*(Chart on the site's {topic} page: {record['title']}; its numbers "
                         f"are in `benchmarks/results/{topic}/{name}.json`.)*")
    return "\n".join(lines) + "\n", pictures


def site_pages():
    """{path under docs/: content} of the results pages, their charts and an index."""
    generated = {}
    index = ["# Results", "", "What t2t_lite measured, one page per topic, today's numbers only; "
             "each table says the machine, date, command and load that gave it. Older numbers "
             "are in git's history.", "", "Each table is a record, "
             "`benchmarks/results/TOPIC/NAME.json`. To add or refresh one, run the benchmark "
             "alone on the machine with `--record benchmarks/results/TOPIC/NAME.json` (the "
             "scripts in `benchmarks/` take it), show it on `benchmarks/results/TOPIC.md` with a "
             "line `{{ record NAME }}` (or `{{ chart NAME }}`), describe it there in words, and "
             "run `python docs/results_pages.py`, which writes `benchmarks/RESULTS.md` from "
             "them. The tests fail when that file is stale, or when a page, a guide or the "
             "README repeats a measured value instead of linking to its table.", ""]
    for topic in topics():
        markdown, pictures = render(topic, charts=True)
        note = GENERATED_NOTE.format(source=f"`benchmarks/results/{topic}.md` and its records")
        title, _, body = markdown.partition("\n")
        generated[f"results/{topic}.md"] = f"{title}\n\n{note}\n{body}"
        generated.update({f"results/{topic}/{name}.svg": svg for name, svg in pictures.items()})
        index.append(f"- [{title.lstrip('# ')}]({topic}.md)")
    generated["results/index.md"] = "\n".join(index) + "\n"
    return generated


def repository_links(markdown):
    """A topic page's links, written for the site's results/ folder, made to work in
    benchmarks/RESULTS.md: a guide is ../docs/guides/..., another topic an anchor here."""

    titles = {f"{topic}.md": (RESULTS_DIR / f"{topic}.md").read_text(
        encoding="utf-8").split("\n", 1)[0].lstrip("# ") for topic in topics()}

    def relink(match):
        target = match.group(1)
        if target.startswith("../"):
            return f"](../docs/{target[3:]})"
        page, _, anchor = target.partition("#")
        if page in titles:
            return f"](#{anchor or slug(titles[page])})"
        return match.group(0)

    return re.sub(r"\]\(([^)\s]+)\)", relink, markdown)


def slug(title):
    """The anchor MkDocs's toc (and GitHub, for these titles) gives a heading."""
    return slugify(title, "-")


def results_md():
    """benchmarks/RESULTS.md: every topic, its headings one level down, under one title."""
    parts = ["# Benchmark results", "",
             "*Generated by `python docs/results_pages.py` from `benchmarks/results/` (each "
             "topic's page and its records); edit those, not this file. The site shows the same "
             "pages with charts.*", ""]
    for topic in topics():
        markdown, _ = render(topic, charts=False)
        parts.append(repository_links(re.sub(r"^(#+) ", r"#\1 ", markdown, flags=re.MULTILINE)))
    return "\n".join(parts)


def record_numbers():
    """{measured value: 'topic/name'} of every record's rows: each value as the table shows it,
    read by significant_numbers (4,738 as 4738, 38.40 as 38.4)."""
    numbers = {}
    for path in sorted(RESULTS_DIR.glob("*/*.json")):
        record = load_record(path)
        for row in record["rows"]:
            for value, column in zip(row, record["columns"]):
                text = value if isinstance(value, str) else cell(value, column)
                for written in significant_numbers(text):
                    numbers.setdefault(written, f"{path.parent.name}/{path.stem}")
    return numbers


def significant_numbers(text):
    """The measured values in `text` (see NUMBER), without commas and trailing zeros."""
    found = []
    for match in NUMBER.finditer(text):
        whole, fraction = match.group(1).replace(",", ""), match.group(2) or ""
        digits = (whole + fraction).lstrip("0")
        if len(digits) >= 3 and (fraction or (len(whole) >= 4 and int(whole) % 100)):
            fraction = fraction.rstrip("0")  # 38.40 and 38.4 are one measurement
            found.append(whole + ("." + fraction if fraction else ""))
    return found


def repeated_numbers(text, numbers):
    """[(number, record)] of the records' numbers that `text` (hand-written prose) repeats.
    Code spans and blocks are left out: commands and outputs, not measurements."""
    prose = re.sub(r"```.*?```|`[^`\n]*`", " ", text, flags=re.DOTALL)
    prose = YEAR.sub(" ", prose)
    return [(number, numbers[number]) for number in significant_numbers(prose)
            if number in numbers]


def main(argv=None):
    parser = argparse.ArgumentParser(description="Write benchmarks/RESULTS.md from "
                                     "benchmarks/results/ (the topics' pages and records).")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when benchmarks/RESULTS.md is stale")
    args = parser.parse_args(argv)
    text = results_md()
    if args.check:
        if RESULTS_MD.read_text(encoding="utf-8") != text:
            print("benchmarks/RESULTS.md is stale: run `python docs/results_pages.py`",
                  file=sys.stderr)
            return 1
        return 0
    temporary = RESULTS_MD.with_suffix(".md.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(RESULTS_MD)
    return 0


if __name__ == "__main__":
    sys.exit(main())
