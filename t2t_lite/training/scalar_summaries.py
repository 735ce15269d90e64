"""TensorBoard scalars written without TensorFlow, for the JAX trainer and its evaluations: the
event records tf.summary.scalar writes (a float32 tensor with the scalars plugin's metadata),
through TensorBoard's own record writer and protos, so that TensorBoard and
t2t_lite.training.summaries read both trainers' files alike."""

import os
import socket
import time

import numpy as np
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins.scalar import metadata
from tensorboard.summary.writer.record_writer import RecordWriter
from tensorboard.util import tensor_util


class ScalarWriter:
    """Appends scalars to a new event file in `directory` (one per writer, as TensorFlow's),
    made at the first scalar written: a command refused before it evaluates leaves no file."""

    def __init__(self, directory):
        self._directory = directory
        self._records = None

    def _write(self, event):
        if self._records is None:
            os.makedirs(self._directory, exist_ok=True)
            name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
                    f"{os.getpid()}.{id(self)}.v2")
            self._records = RecordWriter(open(os.path.join(self._directory, name), "wb"))
            self._write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))
        self._records.write(event.SerializeToString())
        self._records.flush()

    def scalars(self, step, values, descriptions=None):
        """Writes {name: number} at `step`, each with its description if `descriptions` has
        one."""
        summary = summary_pb2.Summary()
        for name, value in values.items():
            summary.value.add(
                tag=name, tensor=tensor_util.make_tensor_proto(np.float32(value)),
                metadata=metadata.create_summary_metadata(
                    display_name=None, description=(descriptions or {}).get(name)))
        self._write(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

    def close(self):
        if self._records is not None:
            self._records.close()
