"""``PodKey``, the one name of a pod every engine, the store and the loops use.

A module of its own directly under ``engine``, so that each engine imports it and still stands
alone (the import-linter independence contract)."""

from __future__ import annotations

from typing import NamedTuple


class PodKey(NamedTuple):
    """A pod's ``(namespace, name)``: a tuple, so a plain ``(namespace, name)`` pair is the
    same key (equal, same hash, same order), and ``str`` gives ``namespace/name``."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"
