"""datagen's TFRecord shards read without TensorFlow, for the JAX path on a machine without it.

Hand-written because no maintained library reads TFRecords without TensorFlow or PyTorch: the
format is a frame per record (8 bytes of length, 4 of its CRC, the record, 4 of its CRC), and
each record a tf.train.Example, parsed here by the protobuf runtime from the two messages of
TensorFlow's example.proto that datagen's int64 features use, declared below (TensorFlow ships
the compiled ones). Records' CRCs are not checked (that needs CRC-32C, which no library here
has): each shard's SHA-256 is, from the bytes read, against what datagen recorded
(t2t_lite.data.shard_records), which finds the same damage; and a frame that runs past the end
of its file is an error.
"""

import hashlib
import os
import struct

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from t2t_lite.data import shard_records
from t2t_lite.utils.errors import UserError

_FRAME = struct.Struct("<Q")  # the record's length; then 4 bytes of its CRC
_FEATURES = ("inputs", "targets")
_example_class = None


def _example():
    """The message class of tf.train.Example, with only what int64 features need."""
    global _example_class
    if _example_class is None:
        file = descriptor_pb2.FileDescriptorProto(name="t2t_lite/example.proto",
                                                  package="t2t_lite_example", syntax="proto3")
        field = descriptor_pb2.FieldDescriptorProto
        optional, repeated = field.LABEL_OPTIONAL, field.LABEL_REPEATED

        def message(name, *fields, parent=file.message_type, map_entry=False):
            proto = parent.add(name=name)
            if map_entry:
                proto.options.map_entry = True
            for number, (field_name, kind, label, type_name) in enumerate(fields, 1):
                if field_name is None:
                    continue  # a field number datagen's records do not use
                proto.field.add(name=field_name, number=number, type=kind, label=label,
                                type_name=type_name)
            return proto

        message("Int64List", ("value", field.TYPE_INT64, repeated, None))
        # Feature's oneof: bytes_list = 1, float_list = 2, int64_list = 3.
        message("Feature", (None,) * 4, (None,) * 4,
                ("int64_list", field.TYPE_MESSAGE, optional, ".t2t_lite_example.Int64List"))
        features = message("Features", ("feature", field.TYPE_MESSAGE, repeated,
                                        ".t2t_lite_example.Features.FeatureEntry"))
        message("FeatureEntry", ("key", field.TYPE_STRING, optional, None),
                ("value", field.TYPE_MESSAGE, optional, ".t2t_lite_example.Feature"),
                parent=features.nested_type, map_entry=True)
        message("Example", ("features", field.TYPE_MESSAGE, optional,
                            ".t2t_lite_example.Features"))
        pool = descriptor_pool.DescriptorPool()
        pool.Add(file)
        _example_class = message_factory.GetMessageClass(
            pool.FindMessageTypeByName("t2t_lite_example.Example"))
    return _example_class


def read_records(path, sha256=None, fix="run datagen again to rewrite it"):
    """The records (bytes) of the TFRecord file at `path`, in order. With `sha256` (datagen's
    record of the shard), bytes changed in place are an error; `fix` ends each error."""
    with open(path, "rb") as f:
        data = f.read()
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise UserError(f"{shard_records.changed(path)}: {fix}")
    records, position = [], 0
    while position < len(data):
        if position + 12 > len(data):
            raise UserError(f"{path} is cut short (a record's header at byte {position} runs "
                            f"past its end): {fix}")
        (length,) = _FRAME.unpack_from(data, position)
        start = position + 12
        if start + length + 4 > len(data):
            raise UserError(f"{path} is cut short (the record at byte {position} runs past its "
                            f"end): {fix}")
        records.append(data[start:start + length])
        position = start + length + 4
    return records


def parse_example(record):
    """{"inputs", "targets"}: the int32 ids of a serialized tf.train.Example."""
    feature = _example().FromString(record).features.feature
    return {name: np.asarray(feature[name].int64_list.value, "int32") for name in _FEATURES}


def read_in_written_order(paths, records=None, fix="run datagen again to rewrite it",
                          share=(0, 1)):
    """The examples of the shards at `paths` (in shard order) in the order datagen wrote them
    (example i to shard i % len(paths)), as pipeline.read_in_written_order gives them. `records`
    ({basename: record}, the split's stats.json "shards") checks each shard's SHA-256.

    share (index, count): only share `index` of `count` disjoint ones (a process's of a
    multi-host run): shards index, index + count, ... where there are at least `count`, so that
    each process reads only its own; else examples index, index + count, ... of all."""
    index, count = share
    if count > 1 and len(paths) < count:
        every = read_in_written_order(paths, records, fix)
        yield from (example for i, example in enumerate(every) if i % count == index)
        return
    paths = paths[index::count]
    records = records or {}
    shards = [read_records(path, records.get(os.path.basename(path), {}).get("sha256"), fix)
              for path in paths]
    for i in range(max(map(len, shards), default=0)):
        for shard in shards:
            if i < len(shard):
                yield parse_example(shard[i])
