"""Every limit and switch of the fetcher, and the resolvers it may use.

Only the standard library is imported here, so that a policy (and the
configuration holding one) can be built without the HTTP stack.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_USER_AGENT",
    "FetchPolicy",
    "IPNetwork",
    "Resolver",
    "static_resolver",
    "system_resolver",
]

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
#: ``(host, port)`` → the addresses it resolves to, as strings.
Resolver = Callable[[str, int], Sequence[str]]

DEFAULT_MAX_BYTES = 5 * 1024 * 1024
DEFAULT_USER_AGENT = "researchstore-evidence/1 (+bounded public retrieval)"


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``getaddrinfo`` gives for ``host`` (TCP), in its order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def static_resolver(table: Mapping[str, Sequence[str]], fallback: Resolver | None) -> Resolver:
    """Answer ``table``'s names from it (like curl's ``--resolve``), others from ``fallback``."""
    names = {name.lower().rstrip("."): list(addresses) for name, addresses in table.items()}

    def resolve(host: str, port: int) -> Sequence[str]:
        if host in names:
            return names[host]
        if fallback is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return fallback(host, port)

    return resolve


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    """Every limit and switch of the fetcher; the defaults are the safe ones."""

    #: The most bytes read from the wire, and the most after decoding.
    max_bytes: int = DEFAULT_MAX_BYTES
    max_redirects: int = 5
    #: The total deadline of one retrieval: DNS, connects, TLS, every read.
    timeout_s: float = 30.0
    connect_timeout_s: float = 10.0
    #: A resolver that has not answered by then counts as no egress.
    dns_timeout_s: float = 5.0
    #: Networks let through although not public. Empty: only public addresses.
    allowed_networks: tuple[IPNetwork, ...] = ()
    resolver: Resolver = system_resolver
    #: Trust roots for TLS; None uses httpx's default (certifi).
    ssl_context: ssl.SSLContext | None = None
    #: False: no network at all (every fetch is ``egress_unavailable``).
    egress: bool = True
    user_agent: str = DEFAULT_USER_AGENT

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> FetchPolicy:
        """The policy that the process environment asks for.

        ``RESEARCHSTORE_EGRESS=off`` turns the network off.
        ``RESEARCHSTORE_FETCH_ALLOW`` lists networks let through although not
        public (``127.0.0.1/32,::1/128``): for a local test server, never for
        production. ``RESEARCHSTORE_FETCH_CA_BUNDLE`` names a PEM file of
        trust roots. ``RESEARCHSTORE_FETCH_RESOLVE`` pins names to addresses
        (``host=1.2.3.4,other=5.6.7.8``); those addresses are still checked.
        ``RESEARCHSTORE_FETCH_TIMEOUT`` and ``RESEARCHSTORE_FETCH_MAX_BYTES``
        change the limits.
        """
        env = os.environ if environ is None else environ
        options: dict[str, Any] = {}
        if env.get("RESEARCHSTORE_EGRESS", "").strip().lower() in ("0", "off", "false", "no"):
            options["egress"] = False
        allow = env.get("RESEARCHSTORE_FETCH_ALLOW", "").strip()
        if allow:
            options["allowed_networks"] = tuple(
                ipaddress.ip_network(item.strip(), strict=False)
                for item in allow.split(",")
                if item.strip()
            )
        bundle = env.get("RESEARCHSTORE_FETCH_CA_BUNDLE", "").strip()
        if bundle:
            options["ssl_context"] = ssl.create_default_context(cafile=bundle)
        pins = env.get("RESEARCHSTORE_FETCH_RESOLVE", "").strip()
        if pins:
            table: dict[str, list[str]] = {}
            for item in pins.split(","):
                name, _, address = item.partition("=")
                if name.strip() and address.strip():
                    table.setdefault(name.strip(), []).append(address.strip())
            options["resolver"] = static_resolver(table, system_resolver)
        if env.get("RESEARCHSTORE_FETCH_TIMEOUT", "").strip():
            options["timeout_s"] = float(env["RESEARCHSTORE_FETCH_TIMEOUT"])
        if env.get("RESEARCHSTORE_FETCH_MAX_BYTES", "").strip():
            options["max_bytes"] = int(env["RESEARCHSTORE_FETCH_MAX_BYTES"])
        return cls(**options)
