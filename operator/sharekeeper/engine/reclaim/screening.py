"""Rules 1 and 2 of ``planning`` for every waiting pod at once, as the round starts: whether it
has waited long enough, and whether its queue and every queue above it stay within their
deserved shares with it. Most waiting pods at the top size (8,000 of 10,000) are refused here
and never looked at one by one: their answer is made only if it is read (``Waits``).

In numpy: each queue's room (deserved - allocated, the least over its path) over the
dimensions the waiting pods request, and the pods' requests as rows. The queues' amounts come
dense from the caller when it has them (``ReclaimInputs.rows``: the share engine's); otherwise
they are read from the queues' mappings, which at 10,000 queues costs about what comparing them
pod by pod does. O(waiting pods) in C, plus O(depth) numpy passes over the queues for paths.
With a ``ScreenMemo``, a pod met in an earlier round is not read again (``ScreenMemo``).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from operator import attrgetter

import numpy as np

from sharekeeper.engine.reclaim.values import PODS, QueueState, Waiting
from sharekeeper.engine.resources import QueueRows, Vectors, dense

# What the screen finds of a waiting pod: plain ints, one per waiting pod a round.
TO_DECIDE = 0
ABOVE_SHARE = 1
"""Its share refuses it as the round started (rule 2): it waits this round."""
TOO_SOON = 2
"""It has not waited ``after`` yet (rule 1)."""


def screen(
    waiting: Sequence[Waiting],
    queues: Sequence[QueueState],
    rows: QueueRows | None,
    latest: float,
    memo: ScreenMemo | None = None,
) -> list[int]:
    """Per pod of ``waiting``: too soon (it started waiting after ``latest``), above its share
    (its queue, or one above it, would pass its deserved in a dimension it requests, or its
    queue is not among ``queues``), or to be decided. ``rows``: ``queues``' amounts, dense,
    row by row in their order (None: read from ``queues``). ``memo``: what the caller's
    earlier screens read of their pods (updated)."""
    if not waiting:
        return []
    read = memo if memo is not None else ScreenMemo()
    slots = read.slots_of(waiting)
    names = read.names
    if rows is None:
        rows = QueueRows.read(
            [queue.name for queue in queues],
            [queue.deserved for queue in queues],
            [queue.allocated for queue in queues],
            names,
        )
    asked = read.asked[slots]
    at = read.rows_in(rows)[slots]
    known = at >= 0
    rooms = path_rooms(rows, queues, names)
    room = rooms[np.where(known, at, 0)] if len(queues) else np.zeros_like(asked)
    refused = ((asked > 0) & (asked > room)).any(axis=1) | ~known
    since = read.since[slots]
    found = np.where(since > latest, TOO_SOON, np.where(refused, ABOVE_SHARE, TO_DECIDE))
    codes: list[int] = found.tolist()
    return codes


class ScreenMemo:
    """What screens read of their waiting pods, kept by pod for the next: its request over
    ``names``, when it started waiting, and its queue's row. A ``Waiting`` is never changed once
    made and its maker hands on an unchanged pod as the very same object, so a pod met before
    is found by its identity alone, without reading it: at the top size, reading 10,000 pods'
    fields a round (each pod somewhere in a large heap) was a sixth of the engine's time.

    The pods read since the last time all were read again are kept alive (their identities
    stay theirs), at most twice the number of the last round's pods."""

    def __init__(self) -> None:
        self.pods: list[Waiting] = []
        self._slots: dict[int, int] = {}
        """Per pod of ``pods``, by identity: its place there and in the arrays below."""
        self.names: tuple[str, ...] = ()
        """The dimensions the pods request (``pods`` aside): the columns of ``asked``."""
        self.asked: Vectors = np.zeros((0, 0), np.int64)
        self.since: np.ndarray = np.zeros(0, np.float64)
        self._queues: list[str] = []
        self._rows: tuple[Sequence[str], np.ndarray] | None = None
        """The queues of the rows the pods' queues were last found in, and each pod's row
        there (-1: not among them)."""

    def slots_of(self, waiting: Sequence[Waiting]) -> np.ndarray:
        """Each pod's place in ``pods``: the pods met before by their identities (in C), the
        others read and added; every pod read again when the new ones request a dimension
        not met before, or ``pods`` would grow past twice ``waiting``."""
        slots = np.fromiter(
            map(self._slots.get, map(id, waiting), repeat(-1)), np.int64, len(waiting)
        )
        new = np.flatnonzero(slots < 0).tolist()
        if not new:
            return slots
        fresh = [waiting[at] for at in new]
        requests = [pod.request for pod in fresh]
        if len(self.pods) + len(fresh) > 2 * len(waiting) or not (
            set().union(*requests) - {PODS} <= set(self.names)
        ):
            self._read(waiting)
            return np.arange(len(waiting))
        start = len(self.pods)
        added = range(start, start + len(fresh))
        self.pods += fresh
        self._slots.update(zip(map(id, fresh), added, strict=True))
        self.asked = np.concatenate([self.asked, dense(requests, self.names)])
        self.since = np.concatenate([self.since, _since(fresh)])
        self._queues += [pod.queue for pod in fresh]
        slots[new] = added
        return slots

    def _read(self, waiting: Sequence[Waiting]) -> None:
        self.pods = list(waiting)
        self._slots = {id(pod): at for at, pod in enumerate(self.pods)}
        requests = [pod.request for pod in waiting]
        self.names = tuple(sorted(set().union(*requests) - {PODS}))
        self.asked = dense(requests, self.names)
        self.since = _since(waiting)
        self._queues = [pod.queue for pod in waiting]
        self._rows = None

    def rows_in(self, rows: QueueRows) -> np.ndarray:
        """Per pod of ``pods``, its queue's row in ``rows`` (-1: none): found again for the pods
        added since, or for all when ``rows`` has other queues than last time."""
        last = self._rows
        if last is None or not (last[0] is rows.queues or last[0] == rows.queues):
            done, at = 0, np.zeros(0, np.int64)
        else:
            done, at = len(last[1]), last[1]
        if done < len(self._queues):
            found = np.fromiter(
                map(rows.index.get, self._queues[done:], repeat(-1)),
                np.int64,
                len(self._queues) - done,
            )
            at = np.concatenate([at, found])
            self._rows = (rows.queues, at)
        return at


def _since(pods: Sequence[Waiting]) -> np.ndarray:
    return np.fromiter(map(attrgetter("since"), pods), np.float64, len(pods))


def path_rooms(rows: QueueRows, queues: Sequence[QueueState], names: Sequence[str]) -> Vectors:
    """Per queue (rows as ``queues``) and dimension of ``names``: the least deserved - allocated
    over the queue and every queue above it (``state.queue_path``'s walk: an unknown parent or
    a cycle ends it). A dimension ``rows`` does not have is deserved 0 there: no room."""
    room = np.zeros((len(queues), len(names)), np.int64)
    column = {name: at for at, name in enumerate(rows.dimensions)}
    for at, name in enumerate(names):
        found = column.get(name)
        if found is not None:
            room[:, at] = rows.deserved[:, found] - rows.allocated[:, found]
    parents = [queue.parent for queue in queues]
    if not any(parents):
        return room
    index = rows.index
    above = np.array([index.get(p, i) if p else i for i, p in enumerate(parents)], np.int64)
    # After k passes a queue's room is the least over it and its k nearest queues above; the
    # walk stops at the top (its own row) and goes round a cycle, as the path does.
    while True:
        lower = np.minimum(room, room[above])
        if np.array_equal(lower, room):
            return room
        room = lower
