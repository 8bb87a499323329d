"""What a loop wrote and the watch has not brought back yet."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Mapping[str, Any])


class Echoes(Generic[K, V]):
    """A round that starts before the watch event of its own write arrives would see the old
    value and write the same change again; this remembers the written value until the index
    shows it."""

    def __init__(self) -> None:
        self._written: dict[K, V] = {}
        self._sending: dict[K, V] = {}

    def current(self, key: K, seen: V) -> V:
        """The value to diff against: what we wrote, until the index shows it (``seen`` itself,
        the same object, when we wrote nothing since)."""
        written = self._written.get(key)
        if written is None:
            return seen
        if written == seen:
            del self._written[key]  # the watch caught up
            return seen
        return written

    def is_echo(self, key: K, seen: Mapping[str, Any]) -> bool:
        """Whether ``seen`` is what we wrote last or are writing (the watch event of a write
        often arrives before its response)."""
        return seen in (self._written.get(key), self._sending.get(key))

    def sending(self, key: K, expected: V) -> None:
        """A write is on its way; ``expected`` is what the object will hold after it."""
        self._sending[key] = expected

    def wrote(self, key: K, stored: V | None) -> None:
        """Record what the API server stored (None: the object is gone)."""
        self._sending.pop(key, None)
        if stored is None:
            self._written.pop(key, None)
        else:
            self._written[key] = stored

    def forget(self, key: K) -> None:
        """The object is gone (or is a new one of the same name): nothing we wrote to it holds."""
        self._written.pop(key, None)
        self._sending.pop(key, None)
