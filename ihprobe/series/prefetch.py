"""Reading the next checkpoint while the current one is computed on.

:func:`prefetched` hands out ``(item, read(item))`` in order, as a plain loop would, while one
background thread already reads the next items: at most ``ahead`` items past the one being
computed on (one by default), and no more bytes than ``budget`` held at once (half the memory
available when the loop starts, :func:`ihprobe.core.memory.available_bytes`), counting the
item being computed on. The results are those of the plain loop, in its order:

* an exception in ``read`` is raised in the loop when it reaches that item, as it would be
  without prefetching;
* a reader thread that dies without a word (killed) is noticed within a fraction of a second
  and the loop reads the rest itself, with a warning;
* a loop that stops early (a ``break``, an exception, Ctrl-C) stops the reader once the read
  under way ends (nothing new is started); it is a daemon thread, so it never keeps the
  process alive.

>>> [value for _, value in prefetched([1, 2, 3], lambda x: x * 10)]
[10, 20, 30]
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from ihprobe.core.memory import available_bytes

log = logging.getLogger(__name__)
Item = TypeVar("Item")
Value = TypeVar("Value")
POLL_SECONDS = 0.1  # how often a waiting side looks whether the other is gone


def prefetched(
    items: Sequence[Item],
    read: Callable[[Item], Value],
    *,
    ahead: int = 1,
    size: Callable[[Item], int] | None = None,
    budget: int | None = None,
) -> Iterator[tuple[Item, Value]]:
    """``(item, read(item))`` for every item in order; with ``ahead`` > 0 the next items are
    read in a background thread while the caller works on the current one.

    Args:
        items: what to read, in order.
        read: reads one item (a disk read, an offline-cache read, a hub download).
        ahead: how many items may be read past the one the caller holds; 0 reads each item
            only when the caller asks for it (no thread).
        size: an item's bytes once read (an estimate before reading it); None counts nothing.
        budget: the most bytes held at once, the caller's item included (default: half the
            memory available now); an item that alone exceeds it is still read, alone.

    Example:
        >>> list(prefetched("ab", str.upper, ahead=0))
        [('a', 'A'), ('b', 'B')]
    """
    items = list(items)
    if ahead <= 0 or len(items) < 2:
        for item in items:
            yield item, read(item)
        return
    reader = _Reader(items, read, ahead, size, available_bytes() // 2 if budget is None else budget)
    try:
        yield from reader.results()
    finally:
        reader.stop()


class _Reader:
    """The background thread of :func:`prefetched` and the hand-over between it and the loop."""

    def __init__(self, items, read, ahead: int, size, budget: int):
        self.items, self.read, self.ahead, self.budget = items, read, ahead, budget
        self.size = size or (lambda item: 0)
        self.ready: queue.Queue = queue.Queue()
        self.room = threading.Condition()
        self.held: list[int] = []  # bytes of each item read and not yet let go by the loop
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._work, name="ihprobe-prefetch", daemon=True)
        self.thread.start()

    def _work(self) -> None:
        for index, item in enumerate(self.items):
            need = self.size(item)
            if not self._wait_for_room(need):
                return
            try:
                outcome = ("done", self.read(item))
            except BaseException as err:  # noqa: BLE001 - handed to the loop, raised there
                self.ready.put((index, "error", err))
                return
            self.ready.put((index, *outcome))

    def _wait_for_room(self, need: int) -> bool:
        """Wait until fewer than ``ahead + 1`` items are held and ``need`` more bytes fit
        (or nothing is held); False once the loop has stopped."""
        with self.room:
            while not self.stopped.is_set():
                full = len(self.held) > self.ahead
                too_big = self.held and sum(self.held) + need > self.budget
                if not full and not too_big:
                    self.held.append(need)
                    return True
                self.room.wait(POLL_SECONDS)
        return False

    def _let_go(self) -> None:
        """The loop is done with its oldest item: its room goes back to the reader."""
        with self.room:
            if self.held:
                self.held.pop(0)
            self.room.notify_all()

    def results(self) -> Iterator[tuple]:
        for index, item in enumerate(self.items):
            if index:
                self._let_go()
            found = self._next()
            if found is None:  # the reader died without a word: read the rest here
                log.warning(
                    "the prefetching thread stopped unexpectedly; reading the remaining %d "
                    "checkpoints without it",
                    len(self.items) - index,
                )
                for rest in self.items[index:]:
                    yield rest, self.read(rest)
                return
            kind, value = found
            if kind == "error":
                raise value
            yield item, value

    def _next(self) -> tuple[str, object] | None:
        """The next outcome the reader handed over, or None when it is gone without one."""
        while True:
            try:
                _, kind, value = self.ready.get(timeout=POLL_SECONDS)
                return kind, value
            except queue.Empty:
                if not self.thread.is_alive() and self.ready.empty():
                    return None

    def stop(self) -> None:
        self.stopped.set()
        with self.room:
            self.room.notify_all()
