"""Where queues come from: a Queue people made that takes the name of a Volcano Queue.

While a SchedulerPolicy has ``queueSource: Volcano``, the operator keeps one Queue per Volcano
Queue, of the same name. A Queue of that name that is not such a mirror (no source label, or no
owner reference to that Volcano Queue) is never overwritten: it *shadows* the Volcano Queue,
which is then not mirrored, and the Queue says so. A mirror of an older Volcano Queue of the
same name (another UID) shadows nothing: it is deleted, and the new one mirrored.
"""

from __future__ import annotations

from collections.abc import Mapping

from sharekeeper.engine.shares.snapshot import QueueName, QueueSnapshot, Reason


def shadowed(
    queues: Mapping[QueueName, QueueSnapshot], volcano_queues: Mapping[QueueName, str]
) -> dict[QueueName, Reason]:
    """The queues that shadow a Volcano Queue being mirrored, with the reason. O(Volcano
    Queues)."""
    found: dict[QueueName, Reason] = {}
    for name in sorted(volcano_queues):
        queue = queues.get(name)
        if queue is not None and queue.mirror_of is None:
            found[name] = Reason(
                "VolcanoQueueShadowed",
                f"Volcano Queue {name} is not mirrored: this Queue has its name and was not "
                "made by the operator (no sharekeeper.io/source=volcano label, or no owner "
                "reference to that Volcano Queue), so it is left as it is; rename or delete "
                "this Queue to have the Volcano Queue mirrored",
            )
    return found
