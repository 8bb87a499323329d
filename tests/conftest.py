"""Shared test settings: Hypothesis profiles. The default one is derandomized, so `make test`
runs the same examples every time and a red CI always means a change; ``HYPOTHESIS_PROFILE=
thorough`` explores ten times as many, randomly, to find new counterexamples."""

from __future__ import annotations

import os

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
