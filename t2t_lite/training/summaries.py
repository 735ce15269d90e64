"""Reading back the scalars the trainer wrote to MODEL_DIR/train and MODEL_DIR/eval, to plot them
where no TensorBoard server runs (a notebook, a script)."""

import os

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.util.tensor_util import make_ndarray

from t2t_lite.utils.errors import UserError

RUNS = ("train", "eval")


def read_scalars(model_dir, run="train"):
    """{tag: ([step], [value])} of the summaries in MODEL_DIR/run, in step order.

    TensorBoard's own reader, keeping every point (size_guidance 0). A step written twice (a
    resumed run redoes the steps after its last checkpoint) has the value written last.
    """
    if run not in RUNS:
        raise UserError(f"run={run!r}: the trainer writes summaries for {' and '.join(RUNS)}")
    directory = os.path.join(model_dir, run)
    if not os.path.isdir(directory):
        raise UserError(f"{directory} does not exist: train a model in {model_dir} first")
    events = EventAccumulator(directory, size_guidance={"tensors": 0})
    events.Reload()
    scalars = {}
    for tag in events.Tags()["tensors"]:
        last = {event.step: float(make_ndarray(event.tensor_proto))
                for event in events.Tensors(tag)}  # in the order written
        steps = sorted(last)
        scalars[tag] = (steps, [last[step] for step in steps])
    return scalars
