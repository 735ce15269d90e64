"""Reading back the scalars the trainer wrote to MODEL_DIR/train and MODEL_DIR/eval, to plot them
where no TensorBoard server runs (a notebook, a script)."""

import os

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.util.tensor_util import make_ndarray

from t2t_lite.utils.errors import UserError

RUNS = ("train", "eval")


def read_scalars(model_dir, run="train"):
    """{tag: ([step], [value])} of the summaries in MODEL_DIR/run, in step order.

    TensorBoard's own reader, keeping every point (size_guidance 0). A resumed run redoes the
    steps after its last checkpoint: from a step written again on, the points written before are
    replaced, as TensorBoard purges them. In the order written (wall time), not the order the
    reader goes through a run's files, by name: TensorFlow's file names end in a counter, so a
    writer's "...10.v2" comes before an earlier one's "...9.v2" within the same second.
    """
    if run not in RUNS:
        raise UserError(f"run={run!r}: the trainer writes summaries for {' and '.join(RUNS)}")
    directory = os.path.join(model_dir, run)
    if not os.path.isdir(directory):
        raise UserError(f"{directory} does not exist: train a model in {model_dir} first")
    events = EventAccumulator(directory, size_guidance={"tensors": 0},
                              purge_orphaned_data=False)  # purged below, in the order written
    events.Reload()
    scalars = {}
    for tag in events.Tags()["tensors"]:
        points, latest = {}, None
        for event in sorted(events.Tensors(tag), key=lambda event: event.wall_time):
            if latest is not None and event.step <= latest:  # redone after a resume
                points = {step: value for step, value in points.items() if step < event.step}
            points[event.step] = float(make_ndarray(event.tensor_proto))
            latest = event.step
        steps = sorted(points)
        scalars[tag] = (steps, [points[step] for step in steps])
    return scalars
