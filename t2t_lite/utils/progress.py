"""Progress of a job that takes minutes (translating a file, writing a data set): items done,
items per second and, when the total is known, an ETA, on stderr only (the decoder's stdout
is its translations). On a terminal one line is rewritten in place, as tqdm and Keras's
Progbar do; otherwise (a log file, a pipe) a log line every LOG_EVERY_SECONDS."""

import logging
import sys
import time

logger = logging.getLogger("t2t_lite")

LOG_EVERY_SECONDS = 30.0  # between log lines when stderr is not a terminal
REDRAW_EVERY_SECONDS = 0.5  # between redraws of the terminal line


def duration(seconds):
    """60 -> "1m00s", 3700 -> "1h01m"."""
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


class Progress:
    """Counts items done: `what` (e.g. "translated") and `unit` (e.g. "lines") name them;
    `total` may be None when it is unknown (no ETA then). A context manager that closes it."""

    def __init__(self, what, unit, total=None, stream=None):
        self.what, self.unit, self.total = what, unit, total
        self.stream = stream or sys.stderr
        self.on_terminal = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.done = 0
        self.start = self.last_shown = time.perf_counter()
        self.drawn = False

    def update(self, count):
        """`count` more items are done."""
        self.done += count
        now = time.perf_counter()
        interval = REDRAW_EVERY_SECONDS if self.on_terminal else LOG_EVERY_SECONDS
        if now - self.last_shown >= interval:
            self.last_shown = now
            self._show(self.line(now))

    def line(self, now=None):
        elapsed = max((now or time.perf_counter()) - self.start, 1e-9)
        rate = self.done / elapsed
        done = f"{self.done:,}/{self.total:,}" if self.total is not None else f"{self.done:,}"
        text = f"{self.what} {done} {self.unit}  {rate:,.1f} {self.unit}/s"
        if self.total is not None and rate > 0:
            text += f"  ETA {duration(max(self.total - self.done, 0) / rate)}"
        return text

    def _show(self, text):
        if self.on_terminal:
            self.stream.write(f"\r\033[K{text}")
            self.stream.flush()
            self.drawn = True
        else:
            logger.info("%s", text)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self):
        """Clears the terminal line, so that the job's own summary line follows."""
        if self.drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
