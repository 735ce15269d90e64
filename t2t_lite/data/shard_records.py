"""What datagen wrote into each shard (examples, bytes, SHA-256), and whether it is still there.

A shard cut short by a bad copy or a full disk, or changed in place, otherwise reads as data:
TensorFlow stops at the cut without an error in some readers, and a model would train on a
part of the corpus without anyone knowing. The records live in the split's stats.json (see
t2t_lite.data.problem). Commands that read data compare sizes, which costs nothing; datagen
and the TensorFlow trainer's input (at its start) compare checksums too (the JAX path's reader
hashes the bytes it reads), and datagen writes a damaged split again.
"""

import hashlib
import os

_CHUNK = 1 << 20


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def describe(path, examples):
    """The record of the finished shard at `path`, which holds `examples` examples."""
    return {"examples": examples, "bytes": os.path.getsize(path), "sha256": sha256(path)}


def damage(paths, records, *, checksums):
    """What is wrong with the shards at `paths` against `records` ({basename: describe's
    record}), one phrase per damaged shard: a missing file, another size, or with `checksums`
    another SHA-256. Shards without a record (written before records were kept) are not judged."""
    found = []
    for path in paths:
        record = records.get(os.path.basename(path))
        if record is None:
            continue
        try:
            size = os.path.getsize(path)
        except FileNotFoundError:
            found.append(f"{path} is missing")
            continue
        if size != record["bytes"]:
            found.append(f"{path} is {size:,} bytes, but datagen wrote {record['bytes']:,}")
        elif checksums and sha256(path) != record["sha256"]:
            found.append(changed(path))
    return found


def changed(path):
    """The phrase for the shard at `path` whose bytes are not those datagen wrote."""
    return f"{path} changed since datagen wrote it (its SHA-256 differs)"
