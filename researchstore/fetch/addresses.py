"""The address guard: which names and addresses are never contacted.

``host_problem`` refuses local-looking names before any lookup;
``resolve_addresses`` resolves a name once, under the DNS time limit, and
refuses it when any of its addresses is not public (``address_problem``).

An address is public when it is none of the forms that carry another
address (IPv4-mapped, 6to4, Teredo, NAT64, IPv4-compatible), no cloud
metadata address, in no block of IANA's IPv4 and IPv6 special-purpose
registries (``SPECIAL_PURPOSE``), and, for IPv6, inside ``2000::/3``, the
only space IANA allocates for global unicast (so ``fec0::/10``, the old
site-local space, and every block the IETF keeps in reserve are refused
without a list). Python's own classification (``is_private``,
``is_global``...) is checked last, as a second opinion; it changes between
Python releases, so it is never the only check. Only ``ipaddress``,
``socket`` and ``threading`` are used here.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import threading
from collections.abc import Iterable, Sequence

from researchstore.fetch.errors import FetchError, unsafe_url
from researchstore.fetch.guard import Guard
from researchstore.fetch.policy import FetchPolicy, IPNetwork

__all__ = [
    "GLOBAL_UNICAST_V6",
    "SPECIAL_PURPOSE",
    "IPAddress",
    "address_problem",
    "host_problem",
    "ip_literal",
    "resolve_addresses",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_METADATA = tuple(
    ipaddress.ip_network(net)
    for net in (
        "169.254.169.254/32",  # AWS, GCP, Azure, OpenStack instance metadata
        "169.254.170.2/32",  # AWS ECS task metadata
        "168.63.129.16/32",  # Azure wireserver (a public address)
        "100.100.100.200/32",  # Alibaba Cloud metadata
        "fd00:ec2::254/128",  # AWS metadata over IPv6
    )
)
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
#: IANA's "IPv6 Address Space": global unicast is allocated from here only.
GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")

#: Every block of IANA's IPv4 and IPv6 Special-Purpose Address Registries
#: (iana-ipv4-special-registry, iana-ipv6-special-registry, as of 2025-10),
#: plus multicast and the deprecated site-local space from the address-space
#: registries. A block is refused whether or not the registry calls it
#: globally reachable: anycast relays, AS112 sinks and translation prefixes
#: never serve a public page. A block inside another one is covered by its
#: parent (192.0.0.0/24 holds 192.0.0.8/32, 2001::/23 holds 2001:1::1/128...).
#: IPv6 blocks outside ``2000::/3`` are listed although that check refuses
#: them anyway, so that the refusal names the block.
SPECIAL_PURPOSE: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ipaddress.ip_network(block), name)
    for block, name in (
        ("0.0.0.0/8", '"this network"'),
        ("10.0.0.0/8", "private use"),
        ("100.64.0.0/10", "shared address space (CGNAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link local"),
        ("172.16.0.0/12", "private use"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation (TEST-NET-1)"),
        ("192.31.196.0/24", "AS112-v4"),
        ("192.52.193.0/24", "AMT"),
        ("192.88.99.0/24", "deprecated 6to4 relay anycast"),
        ("192.168.0.0/16", "private use"),
        ("192.175.48.0/24", "direct delegation AS112 service"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation (TEST-NET-2)"),
        ("203.0.113.0/24", "documentation (TEST-NET-3)"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
        ("255.255.255.255/32", "limited broadcast"),
        ("::1/128", "loopback"),
        ("::/128", "unspecified"),
        ("::ffff:0:0/96", "IPv4-mapped"),
        ("64:ff9b::/96", "IPv4-IPv6 translation"),
        ("64:ff9b:1::/48", "IPv4-IPv6 translation (local use)"),
        ("100::/64", "discard only"),
        ("100:0:0:1::/64", "dummy IPv6 prefix"),
        ("2001::/23", "IETF protocol assignments"),
        ("2001:db8::/32", "documentation"),
        ("2002::/16", "6to4"),
        ("2620:4f:8000::/48", "direct delegation AS112 service"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing (SRv6) SIDs"),
        ("fc00::/7", "unique local"),
        ("fe80::/10", "link-local unicast"),
        ("fec0::/10", "deprecated site-local"),
        ("ff00::/8", "multicast"),
    )
)
_LOCAL_SUFFIXES = (
    ".localhost", ".local", ".localdomain", ".internal", ".intranet", ".lan", ".home.arpa",
    ".corp", ".private",
)  # fmt: skip
_NUMERIC_LABEL = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")


def host_problem(host: str) -> str | None:
    """Why a host name (not an address) is never fetched, or None."""
    if ip_literal(host) is not None:
        return None  # an address: checked like any resolved one
    if host == "localhost" or host.endswith(_LOCAL_SUFFIXES) or host == "localhost.localdomain":
        return "a local name"
    labels = host.split(".")
    if len(labels) < 2:
        return "a single-label name resolves inside the local network"
    if all(_NUMERIC_LABEL.match(label) for label in labels):
        return "a numeric host that is not a plain address"
    return None


def ip_literal(host: str) -> IPAddress | None:
    """``host`` as an address when it is one (``[::1]`` included), else None."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def address_problem(address: IPAddress, allowed: Iterable[IPNetwork] = ()) -> str | None:
    """Why ``address`` must not be connected to, or None when it is public (or allowed)."""
    for network in allowed:
        if address.version == network.version and address in network:
            return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return "an IPv4-mapped IPv6 address"
        if address.sixtofour is not None:
            return "a 6to4 address (IPv4 inside IPv6)"
        if address.teredo is not None:
            return "a Teredo address (IPv4 inside IPv6)"
        if any(address in network for network in _NAT64):
            return "a NAT64 address (IPv4 inside IPv6)"
        if address in _IPV4_COMPATIBLE and not address.is_unspecified and not address.is_loopback:
            return "an IPv4-compatible IPv6 address"
    checks = (
        (any(address.version == n.version and address in n for n in _METADATA),
         "a cloud metadata address"),
        (address.is_loopback, "a loopback address"),
        (address.is_unspecified, "the unspecified address"),
        (address.is_link_local, "a link-local address"),
        (address.version == 4 and address in _CGNAT, "a shared (CGNAT) address"),
        (address.is_multicast, "a multicast address"),
        (address.is_private, "a private address"),
    )  # fmt: skip
    for refused, why in checks:
        if refused:
            return why
    for network, name in SPECIAL_PURPOSE:
        if address.version == network.version and address in network:
            return f"a special-purpose address ({name}, {network})"
    if address.version == 6 and address not in GLOBAL_UNICAST_V6:
        return f"outside {GLOBAL_UNICAST_V6}, the only global unicast IPv6 space"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "not a globally reachable address"
    return None


def resolve_addresses(host: str, port: int, policy: FetchPolicy, guard: Guard) -> list[str]:
    """Resolve once, within the DNS limit, and check every address; refuse on any bad one."""
    literal = ip_literal(host)
    if literal is not None:
        addresses = [str(literal)]
    else:
        addresses = _run_resolver(host, port, policy, guard)
    if not addresses:
        raise FetchError("unavailable", "not_found", f"{host} has no address")
    checked = []
    for text in addresses:
        address = ip_literal(text.split("%")[0]) if "%" in text else ip_literal(text)
        if address is None:
            raise unsafe_url(f"{host} resolved to something that is not an address: {text!r}")
        problem = address_problem(address, policy.allowed_networks)
        if problem:
            raise unsafe_url(f"{host} resolves to {address}, {problem}")
        checked.append(str(address))
    return checked


def _run_resolver(host: str, port: int, policy: FetchPolicy, guard: Guard) -> list[str]:
    answer: list[Sequence[str]] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            answer.append(policy.resolver(host, port))
        except BaseException as error:
            failure.append(error)

    limit = min(policy.dns_timeout_s, guard.remaining())
    # getaddrinfo cannot be interrupted: a daemon thread lets the deadline win.
    thread = threading.Thread(target=work, name="researchstore-resolve", daemon=True)
    thread.start()
    thread.join(max(limit, 0.0))
    if thread.is_alive():
        if guard.remaining() <= 0:
            raise FetchError("unavailable", "timeout", "the total time limit ran out")
        raise FetchError(
            "unavailable",
            "egress_unavailable",
            f"no DNS answer for {host} within {policy.dns_timeout_s:g}s",
        )
    if failure:
        error = failure[0]
        if isinstance(error, socket.gaierror):
            if error.errno in (
                socket.EAI_NONAME,
                getattr(socket, "EAI_NODATA", None),
                getattr(socket, "EAI_ADDRFAMILY", None),
            ):
                raise FetchError(
                    "unavailable", "not_found", f"{host}: no such host ({error})"
                ) from None
            raise FetchError(
                "unavailable", "egress_unavailable", f"{host} could not be resolved: {error}"
            ) from None
        if isinstance(error, OSError):
            raise FetchError(
                "unavailable", "egress_unavailable", f"{host} could not be resolved: {error}"
            ) from None
        raise error
    return [str(address) for address in answer[0]]
