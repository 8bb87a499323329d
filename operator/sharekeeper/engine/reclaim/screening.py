"""Rules 1 and 2 of ``planning`` for every waiting pod at once, as the round starts: whether it
has waited long enough, and whether its queue and every queue above it stay within their
deserved shares with it. Most waiting pods at the top size (8,000 of 10,000) are refused here
and never looked at one by one: their answer is made only if it is read (``Waits``).

In numpy: each queue's room (deserved - allocated, the least over its path) over the
dimensions the waiting pods request, and the pods' requests as rows. The queues' amounts come
dense from the caller when it has them (``ReclaimInputs.rows``: the share engine's); otherwise
they are read from the queues' mappings, which at 10,000 queues costs about what comparing them
pod by pod does. O(waiting pods) in C, plus O(depth) numpy passes over the queues for paths.
"""

from __future__ import annotations

from collections.abc import Sequence
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
) -> list[int]:
    """Per pod of ``waiting``: too soon (it started waiting after ``latest``), above its share
    (its queue, or one above it, would pass its deserved in a dimension it requests, or its
    queue is not among ``queues``), or to be decided. ``rows``: ``queues``' amounts, dense,
    row by row in their order (None: read from ``queues``)."""
    if not waiting:
        return []
    requests = [pod.request for pod in waiting]
    names = sorted(set().union(*requests) - {PODS})
    asked = dense(requests, names)
    if rows is None:
        rows = QueueRows.read(
            [queue.name for queue in queues],
            [queue.deserved for queue in queues],
            [queue.allocated for queue in queues],
            names,
        )
    at = np.fromiter((rows.index.get(pod.queue, -1) for pod in waiting), np.int64, len(waiting))
    known = at >= 0
    rooms = path_rooms(rows, queues, names)
    room = rooms[np.where(known, at, 0)] if len(queues) else np.zeros_like(asked)
    refused = ((asked > 0) & (asked > room)).any(axis=1) | ~known
    since = np.fromiter(map(attrgetter("since"), waiting), np.float64, len(waiting))
    found = np.where(since > latest, TOO_SOON, np.where(refused, ABOVE_SHARE, TO_DECIDE))
    codes: list[int] = found.tolist()
    return codes


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
