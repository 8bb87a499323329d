"""Shared test settings: Hypothesis profiles. The default one is derandomized, so `make test`
runs the same examples every time and a red CI always means a change; ``HYPOTHESIS_PROFILE=
thorough`` explores ten times as many, randomly, to find new counterexamples. And
``collector_restored`` for the tests that change the process's garbage collector."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    max_examples=500,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True)
def collector_on() -> None:
    """Every test starts with the cyclic collector on: the commands run in-process here
    (``simulate``) turn it off for the rest of their process, which is the test session."""
    gc.enable()


@pytest.fixture
def collector_restored() -> Iterator[None]:
    """The cyclic collector as it was before the test: on, nothing frozen, the same thresholds
    and callbacks (``sharekeeper.collector`` and the start-up barrier change them)."""
    threshold, callbacks = gc.get_threshold(), list(gc.callbacks)
    yield
    gc.enable()
    gc.unfreeze()
    gc.set_threshold(*threshold)
    gc.callbacks[:] = callbacks
