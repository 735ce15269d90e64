"""Batching across requests, as TensorFlow Serving's batcher and Triton's dynamic batching do:
concurrent requests that ask for the same thing (the same model and options) are run as one
batch, so that a server under load translates at nearly the file decoder's rate rather than a
request at a time.

One worker thread runs every job, so that an engine is never called from two threads at once.
It takes the oldest job and, until max_wait after that job arrived, adds the queued jobs of the
same key while the batch holds at most max_batch_tokens input tokens. The queue is bounded in
items: past it, submit raises QueueFull (the server answers 503 with Retry-After) rather than
holding memory for work it cannot do soon. A job whose client went away is dropped if it has
not started.
"""

import collections
import concurrent.futures
import dataclasses
import logging
import threading
import time

logger = logging.getLogger("t2t_lite")


class QueueFull(Exception):
    """The queue holds too many items to take these now; try again in `retry_after` s."""

    def __init__(self, message, retry_after=1):
        super().__init__(message)
        self.retry_after = retry_after


@dataclasses.dataclass(eq=False)
class Job:
    """Work for the worker: run(items) -> one result per item, called with the items of every
    job of its batch (jobs of an equal, non-None `key`; a None key runs alone); `tokens`, its
    size against max_batch_tokens."""

    key: object
    items: list
    tokens: int
    run: object
    future: concurrent.futures.Future = dataclasses.field(
        default_factory=concurrent.futures.Future)
    arrived: float = dataclasses.field(default_factory=time.monotonic)


class Batcher:
    def __init__(self, max_batch_tokens=4096, max_wait_ms=5.0, max_queued_items=1024):
        self.max_batch_tokens = max_batch_tokens
        self.max_wait = max_wait_ms / 1000
        self.max_queued_items = max_queued_items
        self._queue = collections.deque()
        self._queued_items = 0
        self._condition = threading.Condition()
        self._closing = False
        self._thread = None
        self.batches = 0  # run so far, and the jobs in them: what the log's rate lines count
        self.jobs_run = 0

    def start(self):
        self._thread = threading.Thread(target=self._work, name="t2t-lite-batcher", daemon=True)
        self._thread.start()

    def close(self):
        """Runs what is queued, then stops the worker."""
        with self._condition:
            self._closing = True
            self._condition.notify_all()
        if self._thread:
            self._thread.join()

    @property
    def queued_items(self):
        return self._queued_items

    def submit(self, key, items, tokens, run):
        """Queues a Job and returns it; its future gets the results. QueueFull when the queue
        would hold more than max_queued_items items."""
        job = Job(key, items, tokens, run)
        with self._condition:
            if self._closing:
                raise QueueFull("the server is stopping")
            if self._queued_items + max(len(items), 1) > self.max_queued_items:
                raise QueueFull(f"the queue holds {self._queued_items} inputs, the most it takes "
                                f"is {self.max_queued_items} (--max_queue)")
            self._queue.append(job)
            self._queued_items += max(len(items), 1)
            self._condition.notify_all()
        return job

    def cancel(self, job):
        """Drops `job` if it has not started (its client went away); True if it was."""
        with self._condition:
            if job in self._queue:
                self._queue.remove(job)
                self._queued_items -= max(len(job.items), 1)
                job.future.cancel()
                return True
        return False

    def _work(self):
        while True:
            with self._condition:
                while not self._queue and not self._closing:
                    self._condition.wait()
                if not self._queue:
                    return
                batch = self._take_batch()
            self._run(batch)

    def _take_batch(self):
        """The oldest job and those of its key that join it (see the module's docstring);
        called holding the lock."""
        first = self._queue.popleft()
        batch, tokens = [first], first.tokens
        if first.key is not None:
            deadline = first.arrived + self.max_wait
            while True:
                for job in list(self._queue):
                    if job.key == first.key and tokens + job.tokens <= self.max_batch_tokens:
                        self._queue.remove(job)
                        batch.append(job)
                        tokens += job.tokens
                remaining = deadline - time.monotonic()
                if tokens >= self.max_batch_tokens or remaining <= 0 or self._closing:
                    break
                self._condition.wait(remaining)
        self._queued_items -= sum(max(len(job.items), 1) for job in batch)
        return batch

    def _run(self, batch):
        items = [item for job in batch for item in job.items]
        try:
            results = batch[0].run(items)
        except BaseException as error:  # the requests' answer; the worker goes on
            if not isinstance(error, Exception):
                raise
            for job in batch:
                _settle(job.future, exception=error)
            return
        self.batches += 1
        self.jobs_run += len(batch)
        start = 0
        for job in batch:
            _settle(job.future, result=results[start:start + len(job.items)])
            start += len(job.items)


def _settle(future, result=None, exception=None):
    """Sets a job's outcome unless its waiter cancelled it meanwhile."""
    if not future.set_running_or_notify_cancel():
        return
    if exception is not None:
        future.set_exception(exception)
    else:
        future.set_result(result)
