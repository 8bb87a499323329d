"""The one way to a client of the API server, configured as lightkube configures its own: the
in-cluster service account, else ``$KUBECONFIG``, else ``~/.kube/config``.

Three clients share that configuration, each for what it does best:

- the JSON path straight onto aiohttp (``transport``): every write of ``writing``, tens of
  thousands an hour under a busy gate, and the watches' streams;
- the plain HTTP client (the watches' lists, ``explain``'s list, the QoS checks' usage), whose
  answers are parsed into plain dicts (``model.jsontext``): at 150,000 pods a typed model per
  object would cost more than its parse, and on the lists' large answers httpx's transport
  cost less CPU than aiohttp's;
- lightkube's typed client, for the few requests whose objects it models well: the leader's
  Lease and the webhook's Secret and configuration.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx2 as httpx  # lightkube's HTTP client
from lightkube import AsyncClient
from lightkube.config.client_adapter import AsyncClient as AsyncHttp
from lightkube.config.client_adapter import Client as SyncHttp
from lightkube.config.client_adapter import ConnectionParams, user_auth, verify_cluster
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import User

from sharekeeper.kube.transport import Credentials, JsonApi

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
    """The running operator's three clients, made together and closed together."""

    typed: AsyncClient
    """lightkube's; its writes name us as their field manager."""
    http: httpx.AsyncClient
    """Plain HTTP, for the lists and reads; each request gets ``REQUEST_TIMEOUT_SECONDS``."""
    api: JsonApi
    """The writes' and the watches' streams'."""

    async def close(self) -> None:
        await self.typed.close()
        await self.http.aclose()
        await self.api.close()


def connect() -> Clients:
    """The three clients of one kubeconfig: the writes' JSON path gets the TLS httpx would
    make from it and lightkube's authentication flow."""
    config = _config()
    user = config.user or User()
    api = JsonApi(
        config.cluster.server,
        verify_cluster(config.cluster, user, config.abs_file),
        Credentials(user_auth(user), config.cluster.server),
        connect_seconds=CONNECT_TIMEOUT_SECONDS,
        read_seconds=REQUEST_TIMEOUT_SECONDS,
        field_manager=FIELD_MANAGER,
    )
    typed = AsyncClient(config, field_manager=FIELD_MANAGER)
    return Clients(typed, AsyncHttp(config, _params()), api)


def sync_http() -> httpx.Client:
    """The same, synchronous: for the commands a person runs (``explain``, ``release``)."""
    return SyncHttp(_config(), _params())
