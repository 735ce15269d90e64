"""Text files in and out: a user's parallel text (line-aligned file pairs or TSV) checked as it
is read, the decoder's input and reference files, and the TSV files the decoder writes.

Mistakes in the files (different line counts, bad encodings, missing files) are UserErrors that
name the file and the line.
"""

import csv
import io
import itertools
import os
import random
import select
import stat

from t2t_lite.utils.errors import UserError


def read_lines(path):
    """The lines of a UTF-8 text file, without line ends or a byte order mark; the one reader of
    every text file a user gives."""
    try:
        with open(path, "rb") as f:
            for number, line in enumerate(lines_as_they_come(f), 1):
                yield decode_line(line, number, path)
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror}") from None


def lines_as_they_come(f, wake_every=0.5):
    """The lines (bytes, with their ends) of the binary file `f`, each as soon as it is complete.
    A pipe, FIFO or terminal is waited on in `wake_every`-second slices, never in one blocking
    read(): CPython runs a signal's handler only between bytecodes, so a Ctrl-C that lands just
    before the read(), or on another thread, would otherwise go unseen until input came."""
    try:
        descriptor = f.fileno()
        regular = stat.S_ISREG(os.fstat(descriptor).st_mode)
    except (AttributeError, OSError, io.UnsupportedOperation):  # BytesIO: never blocks
        regular = True
    if regular:
        yield from f
        return
    poller = select.poll()
    poller.register(descriptor, select.POLLIN)
    pending = b""
    while True:
        if not poller.poll(wake_every * 1000):
            continue  # back in Python for a moment: a signal's handler runs here
        chunk = os.read(descriptor, 1 << 16)
        if not chunk:
            break
        *complete, pending = (pending + chunk).split(b"\n")
        yield from (line + b"\n" for line in complete)
    if pending:
        yield pending


def decode_line(line, number, source):
    """Line `number` (bytes) of `source` as text, without its line end (or, the first, its byte
    order mark); invalid UTF-8 is a UserError naming the line."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UserError(f"{source}, line {number}: invalid UTF-8 at byte {error.start + 1} of "
                        "the line: convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
                        ) from None
    if number == 1:
        text = text.removeprefix("\ufeff")
    return text.rstrip("\r\n")


def read_parallel(source_path, target_path):
    """(source, target) pairs of two line-aligned files; different line counts are an error."""
    sources, targets = read_lines(source_path), read_lines(target_path)
    count = 0
    for source, target in itertools.zip_longest(sources, targets):
        if source is None or target is None:
            longer = count + 1 + sum(1 for _ in (sources if target is None else targets))
            source_count, target_count = (longer, count) if target is None else (count, longer)
            raise UserError(f"{source_path} has {source_count} lines but {target_path} has "
                            f"{target_count}: parallel files must be aligned line by line")
        count += 1
        yield source, target


def read_tsv(path):
    """(source, target) pairs of a file of `source<TAB>target` lines; empty lines are empty
    pairs."""
    for number, line in enumerate(read_lines(path), 1):
        if not line.strip():
            yield "", ""
            continue
        columns = line.split("\t")
        if len(columns) != 2:
            raise UserError(f"{path}, line {number}: expected source<TAB>target, found "
                            f"{len(columns)} tab-separated columns")
        yield columns[0], columns[1]


def is_empty(pair):
    return not (pair[0].strip() and pair[1].strip())


def sample_sentences(pairs, max_pairs, seed=0):
    """Both sides of a uniform sample of at most `max_pairs` non-empty pairs.

    Reservoir sampling with a fixed seed: one pass, bounded memory, and the same corpus always
    gives the same sample (so a rebuilt vocabulary is the same vocabulary).
    """
    rng = random.Random(seed)
    sample = []
    seen = 0
    for pair in pairs:
        if is_empty(pair):
            continue
        seen += 1
        if len(sample) < max_pairs:
            sample.append(pair)
        else:
            slot = rng.randrange(seen)
            if slot < max_pairs:
                sample[slot] = pair
    return [sentence for pair in sample for sentence in pair]


def tsv_text(rows, header=None):
    """Rows (and a header) as tab-separated lines, a field with a tab, quote or line end quoted
    as Python's csv module does (excel-tab)."""
    table = io.StringIO()
    writer = csv.writer(table, dialect="excel-tab", lineterminator="\n")
    if header:
        writer.writerow(header)
    writer.writerows(rows)
    return table.getvalue()
