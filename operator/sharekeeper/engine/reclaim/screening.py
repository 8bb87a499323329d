"""The share check of every waiting pod at once, against the queues as the round starts.

Rule 2 of ``planning`` (a pod whose queue, or a queue above it, would exceed its deserved share
with it waits ``AboveShare``) is most waiting pods' answer: at the top size 7,400 of 10,000 in a
round. Asked pod by pod it costs a walk of dictionaries each; asked of all of them together it
is a few comparisons of (pods x dimensions) arrays per level of the queue tree. The round
then decides one by one only the pods that pass, and the refused pods whose path, up to the
queue that refuses them, it has charged or freed before their turn (``planning``).

Cost: O(pods x dimensions) to read the requests, O(queues on their paths x dimensions) to read
those queues, and O(pods x dimensions x tree depth) in numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter

import numpy as np

from sharekeeper.engine.keys import PodKey
from sharekeeper.engine.reclaim.values import PODS, NotServed, NotServedReason, QueueState, Waiting
from sharekeeper.engine.resources import UNLIMITED, Shortfall, dense, dimensions

NOT_REFUSED = -1


@dataclass(frozen=True, slots=True)
class Refusals:
    """The share checks of waiting pods, in the order they were given."""

    levels: list[int]
    """Per pod, where in its queue's path the first queue that refuses it stands (0: its own
    queue); ``NOT_REFUSED`` when none does."""
    answers: list[NotServed | None]
    """Per pod, its ``AboveShare`` answer (the shortfalls in the order of their dimensions'
    names); None when no queue refuses it."""


def refusals(
    pods: Sequence[Waiting],
    queues: Mapping[str, QueueState],
    path: Callable[[str], tuple[str, ...]],
) -> Refusals:
    """Which pods the first queue of their ``path`` refuses whose allocated plus the pod's
    request exceeds its deserved in a dimension the pod requests (``pods`` aside), as the
    queues are. ``path`` names queues of ``queues`` only, none for a queue not among them
    (whose pods are then not refused here)."""
    if not pods:
        return Refusals([], [])
    names = tuple(name for name in dimensions(pod.request for pod in pods) if name != PODS)
    requests = dense([pod.request for pod in pods], names)
    requested = requests > 0
    # The queues of the pods' paths only, each once: replicas share a queue, siblings their
    # parents, and a queue's amounts are mostly out of the CPU's caches (reading all 10,000
    # queues' costs 20 ms where a round's pods wait in 600 of them).
    of_pod = list(map(attrgetter("queue"), pods))
    own = [name for name in dict.fromkeys(of_pod) if name in queues]
    nested = [name for name in own if queues[name].parent in queues]
    paths = {name: path(name) for name in nested}
    on_paths = dict.fromkeys(own)
    for upward in paths.values():
        on_paths.update(dict.fromkeys(upward))
    row = {name: i for i, name in enumerate(on_paths)}
    states = [queues[name] for name in row]
    # What each queue has left of its share, and a last row, for no queue (-1), that refuses
    # nothing: no request exceeds it.
    left = np.full((len(states) + 1, len(names)), UNLIMITED, dtype=np.int64)
    left[:-1] = dense([q.deserved for q in states], names) - dense(
        [q.allocated for q in states], names
    )
    limiting = np.fromiter(map(row.get, of_pod, repeat(-1)), np.int64, len(pods))
    found = np.where(_refused(requests, requested, left[limiting]), 0, NOT_REFUSED)
    # The queues above: only for pods of a queue below another (none in a flat policy).
    no_path: tuple[str, ...] = ()
    for level in range(1, max(map(len, paths.values()), default=0)):
        above = np.fromiter(
            (
                row[upward[level]] if len(upward) > level else -1
                for upward in map(paths.get, of_pod, repeat(no_path))
            ),
            np.int64,
            len(pods),
        )
        first = (found == NOT_REFUSED) & _refused(requests, requested, left[above])
        found[first] = level
        limiting[first] = above[first]
    answers: list[NotServed | None] = [None] * len(pods)
    at = np.flatnonzero(found != NOT_REFUSED)
    wanted, available = requests[at], left[limiting[at]]
    short = requested[at] & (wanted > available)
    # The answers of the pods refused in the same dimensions are made together, a field at a
    # time, by ``map`` over flat lists (a loop of Python over each pod's row costs about four
    # times as much: 7,400 refused at the top size).
    patterns, of_refused = np.unique(short, axis=0, return_inverse=True)
    queue_names = list(on_paths)
    for number, pattern in enumerate(patterns.tolist()):
        members = np.flatnonzero(of_refused.reshape(-1) == number)
        columns = [
            map(Shortfall, repeat(names[d]), wanted[members, d].tolist(),
                available[members, d].tolist())
            for d, refuses in enumerate(pattern)
            if refuses
        ]  # fmt: skip
        refused = at[members].tolist()
        group = [pods[i] for i in refused]
        made = map(
            NotServed,
            map(PodKey, map(attrgetter("namespace"), group), map(attrgetter("name"), group)),
            map(attrgetter("queue"), group),
            repeat(NotServedReason.ABOVE_SHARE),
            map(queue_names.__getitem__, limiting[at[members]].tolist()),
            zip(*columns, strict=True),
        )
        for i, answer in zip(refused, made, strict=True):
            answers[i] = answer
    levels: list[int] = found.tolist()
    return Refusals(levels, answers)


def _refused(requests: np.ndarray, requested: np.ndarray, left: np.ndarray) -> np.ndarray:
    """Per pod: whether its request exceeds what its queue has ``left`` in a requested
    dimension."""
    refused: np.ndarray = np.any(requested & (requests > left), axis=1)
    return refused
