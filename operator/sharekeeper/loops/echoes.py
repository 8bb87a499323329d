"""What a loop wrote and the watch has not brought back yet."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from sharekeeper.model.objects import Obj

K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Obj)

HOLD_SECONDS = 30.0
"""How long a write is trusted over what the watch shows when its echo never comes (a relist
that skipped it, or a loop not told of watch events): far beyond a healthy watch's delay."""


class Echoes(Generic[K, V]):
    """A round that starts before the watch event of its own write arrives would see the old
    value and write the same change again; this remembers the written value until the watch
    shows it.

    The watch shows an object's versions in order, so once it has shown our write, whatever it
    shows next is newer: another client's write, which the next round must see and restore.
    Found: a write was remembered until the next round found it in the store, and another
    client's write that came first hid behind it for good (nothing was restored).
    """

    def __init__(
        self, *, hold_seconds: float = HOLD_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._hold_seconds = hold_seconds
        self._clock = clock
        self._written: dict[K, tuple[V, float]] = {}
        self._sending: dict[K, V] = {}
        self._shown_early: dict[K, V] = {}

    def current(self, key: K, seen: V) -> V:
        """The value to diff against: what we wrote, until the watch shows it (``seen``
        itself, the same object, when we wrote nothing since)."""
        written = self._written.get(key)
        if written is None:
            return seen
        value, since = written
        if value == seen or self._clock() - since > self._hold_seconds:
            del self._written[key]  # the watch caught up, or its echo is not coming
            return seen
        return value

    def shown(self, key: K, value: Obj) -> bool:
        """The watch shows ``value``: whether it is the echo of our own write (not news). After
        our echo, only news can come."""
        written = self._written.get(key)
        if written is not None and written[0] == value:
            del self._written[key]
            return True
        if key in self._sending and self._sending[key] == value:
            self._shown_early[key] = self._sending[key]  # the echo often beats the response
            return True
        return False

    def sending(self, key: K, expected: V) -> None:
        """A write is on its way; ``expected`` is what the object will hold after it."""
        self._sending[key] = expected
        self._shown_early.pop(key, None)

    def wrote(self, key: K, stored: V | None) -> None:
        """Record what the API server stored (None: the object is gone)."""
        self._sending.pop(key, None)
        shown_early = self._shown_early.pop(key, None)
        if stored is None or shown_early == stored:
            self._written.pop(key, None)  # gone, or the watch has shown it already
        else:
            self._written[key] = (stored, self._clock())

    def forget(self, key: K) -> None:
        """The object is gone (or is a new one of the same name): nothing we wrote to it holds."""
        self._written.pop(key, None)
        self._sending.pop(key, None)
        self._shown_early.pop(key, None)
