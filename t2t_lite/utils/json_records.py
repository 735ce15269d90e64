"""The JSON records t2t_lite keeps beside models and data (a model_dir's hparams.json,
problem.json, eval/history.json and info.json; a data_dir's NAME.problem.json, stats.json and
symbols.json), read by one reader: a record cut short, emptied, changed in place or edited into
another shape is one UserError naming the file, what is wrong and how to mend it, never a
traceback from json."""

import json

from t2t_lite.utils.errors import UserError

JSON_TYPES = {dict: "an object", list: "a list", str: "a string", int: "a number",
              float: "a number", bool: "true or false", type(None): "null"}


def damaged(path, what, fix):
    """The error for the record at `path`: `what` is wrong with it, `fix` mends it."""
    return UserError(f"{path} is damaged ({what}): {fix}")


def read_record(path, kind, fix):
    """The value of the JSON record at `path`, which must be of type `kind` (dict or list); one
    that is not (not UTF-8, not JSON, nested deeper than Python reads, other JSON) is the
    UserError `damaged` makes with `fix`. A missing file is FileNotFoundError, which callers
    name in their own words."""
    with open(path, "rb") as f:
        text = f.read()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise damaged(path, f"not JSON: {error.msg.removesuffix(' at')} at line "
                      f"{error.lineno} column {error.colno}", fix) from None
    except UnicodeDecodeError:
        raise damaged(path, "not UTF-8 text", fix) from None
    except RecursionError:  # arrays or objects nested thousands deep
        raise damaged(path, "JSON nested deeper than Python reads", fix) from None
    if not isinstance(value, kind):
        raise damaged(path, f"{JSON_TYPES[type(value)]}, not {JSON_TYPES[kind]}", fix)
    return value
