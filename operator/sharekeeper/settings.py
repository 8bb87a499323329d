"""The one settings object: what the operator is told (flags, environment) and what it assumes
(timings, bounds), built once by ``cli`` and passed down to the parts that use it.

Each part has a small settings type here, with its defaults (the watches', the writes'
retries, the Events' limits, the loops' debouncing, the Lease's, the webhook's); ``Settings``
holds one of each. ``table()`` is the table in docs/operator.md (a test keeps them equal).
Nothing here imports the rest of the operator: the command line reads the defaults for free.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

Address = tuple[str, int]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The operator's log lines, and its webhook process's."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with jitter: the ceiling doubles from ``initial_seconds`` up to
    ``max_seconds``; a pause is between ``floor`` of its ceiling and all of it."""

    initial_seconds: float
    max_seconds: float
    floor: float
    """0 spreads callers that failed together the most."""

    def delay(self, attempt: int, jitter: float) -> float:
        """The pause after failure number ``attempt`` (1: the first); ``jitter`` in [0, 1)."""
        # The exponent is capped: 2.0 ** attempt overflows a float after ~1000 attempts (hours
        # at the maximum delay); the ceiling is reached long before.
        ceiling = min(self.max_seconds, self.initial_seconds * 2.0 ** min(attempt - 1, 64))
        return ceiling * (self.floor + (1 - self.floor) * jitter)


@dataclass(frozen=True, slots=True)
class WatchSettings:
    """How a ListWatch pages, how long each watch lasts, how it backs off, how often it polls."""

    page_size: int = 500
    watch_timeout_seconds: int = 270  # timeoutSeconds of each WATCH request
    backoff_initial_seconds: float = 0.5
    backoff_max_seconds: float = 30.0
    discovery_interval_seconds: float = 30.0

    @property
    def backoff(self) -> Backoff:
        """Fully jittered: thousands of watches may fail, and relist, at once."""
        return Backoff(self.backoff_initial_seconds, self.backoff_max_seconds, 0.0)


DEFAULT_SETTINGS = WatchSettings()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 4
    """Tries of one request, the first included."""
    first_delay_seconds: float = 0.25
    """The pause before the second try; it doubles for each try after, up to the maximum."""
    max_delay_seconds: float = 2.0
    deadline_seconds: float = 10.0
    """The time one request may take, all tries and pauses included."""

    @property
    def backoff(self) -> Backoff:
        """A write waits at least half its ceiling, so that it does not come back at once."""
        return Backoff(self.first_delay_seconds, self.max_delay_seconds, 0.5)


@dataclass(frozen=True, slots=True)
class EventLimits:
    """client-go's defaults."""

    window_seconds: float = 600.0
    remembered: int = 4096
    burst: int = 25
    refill_seconds: float = 300.0


@dataclass(frozen=True, slots=True)
class LoopSettings:
    quiet_seconds: float = 0.3
    """A round starts once no event came for this long: bursts coalesce into one round."""
    max_delay_seconds: float = 2.0
    """...but never later than this after the first event, so a steady trickle still shows."""
    error_backoff_seconds: float = 5.0
    """Pause after a failed round before retrying it."""


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    namespace: str
    identity: str
    name: str = "sharekeeper"
    lease_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_seconds: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_seconds < self.renew_deadline_seconds < self.lease_seconds:
            raise ValueError(
                "leader election needs 0 < retry period < renew deadline < lease duration, "
                f"not {self.retry_seconds}, {self.renew_deadline_seconds}, {self.lease_seconds}"
            )


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    address: tuple[str, int]
    """Where the webhook listens (HTTPS)."""
    namespace: str
    """The operator's namespace: its Service and the certificate's Secret."""
    service: str = "sharekeeper-webhook"
    secret: str = "sharekeeper-webhook-tls"
    url: str | None = None
    """Published in the configuration instead of the Service (local control planes)."""

    @property
    def hosts(self) -> list[str]:
        """The names the certificate must carry: the URL's host, or the Service's."""
        if self.url is not None:
            return [urlsplit(self.url).hostname or "127.0.0.1"]
        return [f"{self.service}.{self.namespace}.svc", f"{self.service}.{self.namespace}"]


DISCOVERY_INTERVAL_ENV = "SHAREKEEPER_DISCOVERY_INTERVAL"
"""Seconds between looks for a CRD that is not served: Volcano's PodGroups, ours."""


@dataclass(frozen=True, slots=True)
class Settings:
    probe_address: Address | None = ("127.0.0.1", 8080)
    """Where /healthz and /readyz are served; None: not served."""
    metrics_address: Address | None = ("127.0.0.1", 9090)
    """Where /metrics is served; None: not served."""
    lease: LeaseSettings | None = None
    """Leader election; None: this replica acts alone."""
    webhook: WebhookSettings | None = None
    """The admission webhook; None: no pod is gated by this replica."""
    verbose: bool = False
    watches: WatchSettings = field(default_factory=WatchSettings)
    writes: RetryPolicy = field(default_factory=RetryPolicy)
    write_concurrency: int = 16
    """API requests the writer has in flight at most."""
    events: EventLimits = field(default_factory=EventLimits)
    rounds: LoopSettings = field(default_factory=LoopSettings)


# Where each setting comes from, and what it means; the defaults are read from the types.
_SOURCES: tuple[tuple[str, str, str], ...] = (
    ("probe_address", "`--health-probe-bind-address`, `--liveness-port`",
     "where `/healthz` and `/readyz` listen (`:8080` in a pod)"),
    ("metrics_address", "`--metrics-bind-address`, `--metrics-port`",
     "where `/metrics` listens (`:9090` in a pod)"),
    ("lease.namespace", "`--leader-elect-resource-namespace`, `$POD_NAMESPACE`",
     "the Lease's namespace (with `--leader-elect`)"),
    ("lease.name", "`--leader-elect-resource-name`", "the Lease's name"),
    ("lease.identity", "", "this replica in the Lease: its host name and a random suffix"),
    ("lease.lease_seconds", "`--leader-elect-lease-duration`",
     "how long a candidate waits after the last renewal it saw"),
    ("lease.renew_deadline_seconds", "`--leader-elect-renew-deadline`",
     "how long a leader acts while it cannot renew"),
    ("lease.retry_seconds", "`--leader-elect-retry-period`",
     "how often the leader renews and a candidate tries"),
    ("webhook.address", "`--webhook-bind-address`", "where the admission webhook listens"),
    ("webhook.url", "`--webhook-url`", "the URL published instead of the Service"),
    ("webhook.namespace", "`--namespace`, `$POD_NAMESPACE`",
     "the webhook Service's and certificate Secret's namespace"),
    ("webhook.service", "", "the webhook's Service, named in the certificate"),
    ("webhook.secret", "", "the Secret that keeps the webhook's certificate"),
    ("verbose", "`-v`", "debug logging, one line per HTTP request"),
    ("watches.discovery_interval_seconds", f"`${DISCOVERY_INTERVAL_ENV}`",
     "how often a CRD that is not served is looked for"),
    ("watches.watch_timeout_seconds", "", "how long each WATCH request lasts"),
    ("watches.page_size", "", "objects per LIST page"),
    ("watches.backoff_initial_seconds", "", "a watch's first pause after a failure"),
    ("watches.backoff_max_seconds", "", "a watch's longest pause"),
    ("writes.attempts", "", "tries of one write, the first included"),
    ("writes.first_delay_seconds", "", "the pause before a write's second try; it doubles"),
    ("writes.max_delay_seconds", "", "a write's longest pause"),
    ("writes.deadline_seconds", "", "the time one write may take, retries included"),
    ("write_concurrency", "", "writes in flight at most"),
    ("events.window_seconds", "", "a repeat within this long is counted into its Event"),
    ("events.remembered", "", "recent Events remembered for that"),
    ("events.burst", "", "Events per object at once..."),
    ("events.refill_seconds", "", "...then one per this many seconds"),
    ("rounds.quiet_seconds", "", "a share round starts once no change came for this long"),
    ("rounds.max_delay_seconds", "", "...or this long after the first change"),
    ("rounds.error_backoff_seconds", "", "the pause after a failed round"),
)  # fmt: skip

_UNSET_PARTS: dict[str, Any] = {
    "lease": LeaseSettings(namespace="sharekeeper", identity="<host>_<8 hex digits>"),
    "webhook": WebhookSettings(address=("", 0), namespace="sharekeeper"),
}
"""The defaults of the optional parts, as they are when turned on."""


def _default(path: str) -> Any:
    part, _, leaf = path.partition(".")
    if not leaf:
        return getattr(Settings(), part)
    holder = getattr(Settings(), part) or _UNSET_PARTS[part]
    return getattr(holder, leaf)


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return f"`{value[0]}:{value[1]}`" if value[0] else "none"
    if isinstance(value, bool):
        return "off" if not value else "on"
    return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"


def table() -> str:
    """The settings as a Markdown table: name, where it is set, default, meaning."""
    rows = [
        "| setting | set by | default | meaning |",
        "|---|---|---|---|",
        *(
            f"| `{path}` | {source or 'fixed'} | {_shown(_default(path))} | {meaning} |"
            for path, source, meaning in _SOURCES
        ),
    ]
    return "\n".join(rows) + "\n"


def settable() -> set[str]:
    """Every leaf setting, for the test that keeps ``_SOURCES`` complete."""
    leaves = set()
    for top in dataclasses.fields(Settings):
        value = _UNSET_PARTS.get(top.name, getattr(Settings(), top.name))
        if dataclasses.is_dataclass(value):
            leaves |= {f"{top.name}.{f.name}" for f in dataclasses.fields(value)}
        else:
            leaves.add(top.name)
    return leaves
