"""Resource vectors in integer internal units, and the Volcano rules the share engine needs.

Units follow ``sharekeeper.model.quantities`` (cpu millicores, memory bytes, pods whole, other
resources milli-units), so Volcano's epsilon of 0.1 internal unit turns every "equal within
epsilon" comparison into plain integer equality (``reference/volcano.md`` §1.2).

Two representations, one per job:

- sparse ``Mapping[str, int]`` for inputs and outputs: a missing dimension is 0, except for a
  capability, where it is ``UNLIMITED``;
- dense ``numpy`` rows over a policy's sorted dimension list, for the policy arithmetic.

Complexity: every function is linear in the number of dimensions (times rows, when dense).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from itertools import compress, repeat
from typing import Final, NewType, cast

import numpy as np
import numpy.typing as npt

ResourceName = NewType("ResourceName", str)
Amounts = Mapping[str, int]
Vectors = npt.NDArray[np.int64]

UNLIMITED: Final = 2**62
"""No bound. Far below int64's limit, so adding a few bounded amounts to it cannot overflow.

Also the ceiling of every dense amount: one quantity read is at most 4 x 10^18 internal units
(``model.quantities.MAX_QUANTITY``), but sums over many objects (a cluster's allocatable, a
queue's requests, every guarantee) are not, so dense rows and sums over rows saturate here
instead of wrapping around int64."""
_INT64_MAX: Final = 2**63 - 1
NO_AMOUNTS: Final[Amounts] = {}
"""Nothing, shared: a result that holds nothing points here rather than to an empty dict of its
own. At 10,000 queues a round made tens of thousands of them, and every dict made counts
towards the collector's next pass. Never changed (a ``Mapping``)."""

CPU: Final = "cpu"
MEMORY: Final = "memory"


def add(left: Amounts, right: Amounts) -> dict[str, int]:
    """Per-dimension sum (Volcano ``Add``)."""
    total = dict(left)
    for name, amount in right.items():
        total[name] = total.get(name, 0) + amount
    return total


def subtract(left: Amounts, right: Amounts) -> dict[str, int]:
    """``left - right`` per dimension of either (a missing one is 0), names sorted."""
    names = set(left) | set(right)
    return {name: left.get(name, 0) - right.get(name, 0) for name in sorted(names)}


def sum_amounts(vectors: Iterable[Amounts]) -> dict[str, int]:
    total: dict[str, int] = {}
    for vector in vectors:
        for name, amount in vector.items():
            total[name] = total.get(name, 0) + amount
    return total


def exceeded_part(left: Amounts, right: Amounts) -> dict[str, int]:
    """``max(left - right, 0)`` per dimension of ``left`` (Volcano ``ExceededPart``)."""
    return {name: max(amount - right.get(name, 0), 0) for name, amount in left.items()}


def capped(left: Amounts, bound: Amounts, *, missing: int) -> dict[str, int]:
    """``min(left, bound)`` on ``left``'s dimensions (Volcano ``MinDimensionResource``).

    ``missing`` is what a dimension absent from ``bound`` means: ``UNLIMITED`` or 0.
    """
    return {name: min(amount, bound.get(name, missing)) for name, amount in left.items()}


def at_least(left: Amounts, right: Amounts) -> dict[str, int]:
    """Per-dimension maximum over the union of dimensions (Volcano ``helpers.Max``)."""
    result = dict(left)
    for name, amount in right.items():
        result[name] = max(result.get(name, 0), amount)
    return result


def nonzero(amounts: Amounts) -> dict[str, int]:
    return {name: amount for name, amount in amounts.items() if amount}


def within(amounts: Amounts, names: Set[str]) -> dict[str, int]:
    """``amounts`` on ``names`` only: what is asked for beyond a policy's dimensions is no
    dimension of it (``shares.computing``). O(len(amounts))."""
    return {name: amount for name, amount in amounts.items() if name in names}


def inqueue_reservation(min_resources: Amounts, allocated: Amounts) -> dict[str, int]:
    """What an admitted PodGroup still reserves: ``max(min - allocated, 0)`` on its listed
    dimensions, positive parts only (Volcano ``util.GetInqueueResource``, v1.15+)."""
    return nonzero(exceeded_part(min_resources, allocated))


def dimensions(vectors: Iterable[Amounts]) -> tuple[str, ...]:
    names: set[str] = set()
    names.update(*vectors)  # one call, not one per vector: there are 3 per queue
    return tuple(sorted(names))


def dense(rows: Sequence[Amounts], names: Sequence[str], *, missing: int = 0) -> Vectors:
    """Sparse rows as a ``len(rows) x len(names)`` integer matrix, saturated at ``UNLIMITED``."""
    # Only the rows that hold something are read: most queues set no guarantee or capability.
    holding = list(map(bool, rows))
    filled = list(compress(rows, holding))
    # dict.get reads dicts only: rows of any other Mapping are copied first (checked in C).
    if set(map(type, filled)) <= {dict}:
        dicts = cast("list[dict[str, int]]", filled)
    else:
        dicts = [dict(row) for row in filled]
    # Column by column, dict.get mapped over the rows in C: half the time of a gather row by
    # row, which made an iterator and a method per row (usage rows: 10,000 a round, all full).
    gathered = np.empty((len(dicts), len(names)), dtype=np.int64)
    for column, name in enumerate(names):
        try:
            gathered[:, column] = np.fromiter(
                map(dict.get, dicts, repeat(name), repeat(missing)), np.int64, len(dicts)
            )
        except OverflowError:  # a sum beyond int64: saturate in Python first (never in practice)
            amounts = map(dict.get, dicts, repeat(name), repeat(missing))
            gathered[:, column] = [min(amount, UNLIMITED) for amount in amounts]
    if len(dicts) == len(rows):
        matrix = gathered
    else:
        matrix = np.full((len(rows), len(names)), missing, dtype=np.int64)
        matrix[np.array(holding, dtype=bool)] = gathered
    if matrix.size and int(matrix.max()) > UNLIMITED:
        np.minimum(matrix, UNLIMITED, out=matrix)
    return matrix


@dataclass(frozen=True, slots=True, eq=False)
class QueueRows:
    """Queues' deserved and allocated as dense rows, one per queue, over ``dimensions`` (a
    dimension not listed is 0): what the share engine computes, for reclaim to screen every
    waiting pod at once. Read-only arrays."""

    queues: tuple[str, ...]
    index: Mapping[str, int]
    """Queue -> its row."""
    dimensions: tuple[str, ...]
    deserved: Vectors
    allocated: Vectors

    @staticmethod
    def read(
        queues: Sequence[str],
        deserved: Sequence[Amounts],
        allocated: Sequence[Amounts],
        dimensions: Sequence[str],
    ) -> QueueRows:
        """Rows read from the queues' mappings (``deserved`` and ``allocated``, in ``queues``'
        order), for a caller the share engine's are not handed to."""
        return QueueRows(
            queues=tuple(queues),
            index={queue: row for row, queue in enumerate(queues)},
            dimensions=tuple(dimensions),
            deserved=dense(deserved, dimensions),
            allocated=dense(allocated, dimensions),
        )


DenseRows = tuple[list[Amounts], Vectors]
"""Sparse rows and the read-only matrix ``dense`` made of them (``dense_again``)."""


def dense_again(rows: list[Amounts], names: Sequence[str], last: DenseRows | None) -> DenseRows:
    """``dense(rows, names)``, read-only, with the rows of ``last`` (made over the same
    ``names``) that are the very same mappings taken from its matrix: mappings of amounts are
    never changed once made, so only the rows that are new objects are read. At 10,000 queues
    a round after a pod event reads a few rows instead of every queue's (each a dict somewhere
    in a large heap: most of ``dense``'s time there)."""
    if last is not None and len(last[0]) == len(rows):
        before, matrix = last
        pairs = enumerate(zip(rows, before, strict=True))
        changed = [row for row, (now, then) in pairs if now is not then]
        if len(changed) * 2 <= len(rows):
            if changed:
                matrix = matrix.copy()
                matrix[changed] = dense([rows[row] for row in changed], names)
                matrix.setflags(write=False)
            return rows, matrix
    matrix = dense(rows, names)
    matrix.setflags(write=False)
    return rows, matrix


def column_sums(matrix: Vectors) -> Vectors:
    """Σ over rows per column, saturated at ``UNLIMITED``: exact where int64 cannot overflow
    (every realistic input), in Python integers otherwise."""
    if _fits(matrix):
        summed: Vectors = np.minimum(matrix.sum(axis=0, dtype=np.int64), UNLIMITED)
        return summed
    return np.array(
        [min(sum(column), UNLIMITED) for column in matrix.T.tolist()], dtype=np.int64
    ).reshape(matrix.shape[1:])


def running_sums(matrix: Vectors) -> Vectors:
    """Cumulative sums over rows, saturated at ``UNLIMITED`` (as ``column_sums``)."""
    if _fits(matrix):
        summed: Vectors = np.minimum(np.cumsum(matrix, axis=0), UNLIMITED)
        return summed
    columns = []
    for column in matrix.T.tolist():
        total, running = 0, []
        for amount in column:
            total = min(total + amount, UNLIMITED)
            running.append(total)
        columns.append(running)
    return np.array(columns, dtype=np.int64).T.reshape(matrix.shape)


def total_of(vector: Vectors) -> int:
    """The exact sum of a vector, as a Python integer."""
    if _fits(vector):
        return int(vector.sum())
    return sum(vector.tolist())


def _fits(matrix: Vectors) -> bool:
    """Whether summing ``matrix`` over its rows cannot overflow int64."""
    if matrix.size == 0:
        return True
    rows: int = matrix.shape[0]
    peak = max(int(matrix.max()), -int(matrix.min()))
    return peak <= _INT64_MAX // max(rows, 1)


def sparse_rows(
    matrix: Vectors, names: Sequence[str], *, common: Vectors | None = None
) -> Sequence[Amounts]:
    """Each dense row back as a mapping over all ``names``. Rows equal to the row before them,
    or to ``common`` (a row the caller knows many rows are), share one mapping, read-only as
    ``NO_AMOUNTS`` is, when at least a tenth of the rows do: each mapping made costs about half
    a microsecond, and its share of the collector's next pass. Siblings in a tree often end
    alike: bench_shares' tree has 3,849 distinct deserved and 3,108 distinct realCapability
    rows of 10,000."""
    if not names:
        return [{} for _ in range(matrix.shape[0])]
    if matrix.shape[0] == 0:
        return []
    own = np.ones(matrix.shape[0], dtype=np.bool_)
    own[1:] = (matrix[1:] != matrix[:-1]).any(axis=1)
    shared = np.zeros_like(own) if common is None else (matrix == common).all(axis=1)
    own &= ~shared
    if np.count_nonzero(own) * 10 > len(own) * 9:
        # Fewer than a tenth of the rows repeat (a flat policy's deserved): looking each row's
        # mapping up would cost more than the few mappings it saves.
        return _rows(matrix, names)
    # Each row's mapping: that of the last row with one of its own up to it (itself, or the
    # row its repeats follow), or the common one, last.
    slots = np.cumsum(own) - 1
    mappings: list[Amounts] = list(_rows(matrix[own], names))
    if common is not None and shared.any():
        slots[shared] = len(mappings)
        mappings.append(dict(zip(names, common.tolist(), strict=True)))
    return list(map(mappings.__getitem__, slots.tolist()))


def _rows(matrix: Vectors, names: Sequence[str]) -> list[dict[str, int]]:
    # The rows zipped out of the columns: no list per row, which at 10,000 rows would outlive
    # a few collections and bring on a full one. Every row has one amount per name, so no
    # ``strict``: a keyword argument takes zip's slow path, a third of the time at 10,000 rows.
    return list(map(dict, map(zip, repeat(names), zip(*matrix.T.tolist(), strict=True))))


def capability_bounds(capabilities: Sequence[Amounts], names: Sequence[str]) -> Vectors:
    """Queues' capabilities as dense bounds over ``names`` (``UNLIMITED`` where a queue sets
    none): cpu or memory at or below 0 mean "no limit" (Volcano §3.1). Read off the matrix's
    columns, not queue by queue (a call a queue, 10,000 a round)."""
    bounds = dense(capabilities, names, missing=UNLIMITED)
    for column, name in enumerate(names):
        if name in (CPU, MEMORY):
            bounds[bounds[:, column] <= 0, column] = UNLIMITED
    return bounds


@dataclass(slots=True)
class Shortfall:
    """One dimension something asks for that a bound cannot give: ``available`` is what the
    bound leaves (negative: already that much over it). Not frozen: a reclaim round makes one
    or more for each of thousands of waiting pods, and a frozen dataclass is built about four
    times slower. Not to be changed once made."""

    resource: str
    requested: int
    available: int
