"""The one way to a client of the API server, configured as lightkube configures its own: the
in-cluster service account, else ``$KUBECONFIG``, else ``~/.kube/config``.

Two kinds of client share that configuration: lightkube's typed client (the Lease, the
webhook's objects, status patches, evictions, Events; its requests carried by aiohttp,
``transport``) and the plain HTTP client under it (the watches, ``explain``'s list, the Queue
mirrors, the QoS checks' usage), whose answers are parsed into plain dicts
(``model.jsontext``): at 150,000 pods a typed model per object would cost more than its parse.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx2 as httpx  # lightkube's HTTP client
from lightkube import AsyncClient
from lightkube.config.client_adapter import AsyncClient as AsyncHttp
from lightkube.config.client_adapter import Client as SyncHttp
from lightkube.config.client_adapter import ConnectionParams, verify_cluster
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import User

from sharekeeper.kube.transport import AiohttpTransport

TypedClient = AsyncClient
"""For the parts outside this room that hand our client on (the webhook's certificate)."""
CONNECT_TIMEOUT_SECONDS = 10.0
REQUEST_TIMEOUT_SECONDS = 60.0  # one LIST page or discovery document, however loaded the server
FIELD_MANAGER = "sharekeeper"


def _params() -> ConnectionParams:
    return ConnectionParams(
        timeout=httpx.Timeout(REQUEST_TIMEOUT_SECONDS, connect=CONNECT_TIMEOUT_SECONDS)
    )


def _config() -> SingleConfig:
    config = KubeConfig.from_env().get()
    assert config is not None  # get() without a default raises ConfigError instead
    return config


@dataclass(frozen=True, slots=True)
class Clients:
    """The running operator's two clients, made together and closed together."""

    typed: AsyncClient
    """lightkube's; its writes name us as their field manager."""
    http: httpx.AsyncClient
    """Plain HTTP. Watches set their own read timeout (above the server's watch timeout);
    everything else gets ``REQUEST_TIMEOUT_SECONDS``."""

    async def close(self) -> None:
        await self.typed.close()
        await self.http.aclose()


def connect() -> Clients:
    """The typed client's requests (every write but the Queue mirrors') carried by aiohttp
    (``transport``), with the TLS httpx would have made from the same kubeconfig: about 40 %
    less of our CPU a PATCH. The plain client keeps httpx's own transport: on the lists' large
    answers aiohttp cost about a quarter more CPU (benchmarks/README.md, "The writes' client")."""
    config = _config()
    tls = verify_cluster(config.cluster, config.user or User(), config.abs_file)
    typed = AsyncClient(config, field_manager=FIELD_MANAGER, transport=AiohttpTransport(tls))
    return Clients(typed, AsyncHttp(config, _params()))


def sync_http() -> httpx.Client:
    """The same, synchronous: for the commands a person runs (``explain``, ``release``)."""
    return SyncHttp(_config(), _params())
