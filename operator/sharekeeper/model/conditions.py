"""Status conditions in the Kubernetes shape. ``lastTransitionTime`` is the publisher's job:
only it knows whether the status changed."""

from __future__ import annotations


def condition(kind: str, status: bool, reason: str, message: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
    }
