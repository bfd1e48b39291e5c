"""Where a webhook may go. Checked at delivery time, on the addresses the name resolves
to then, and the request is sent to the very address that was checked: a check at
submission, or a second lookup at connect time, is bypassed by DNS rebinding.
Redirects are never followed, so a 3xx cannot lead anywhere unchecked.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[..., list[tuple[Any, ...]]]

# Cloud metadata services: refused even when an allowlist would cover them.
METADATA_ADDRESSES = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack
        ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
    }
)


METADATA = "a cloud metadata address"


class DestinationRefused(Exception):
    """The destination is internal and not allowlisted: no attempt will change that."""


class DestinationUnresolvable(Exception):
    """The name did not resolve; DNS may answer later, so this is retried."""


@dataclass(frozen=True)
class Destination:
    url: httpx.URL
    address: IPAddress

    @property
    def connect_url(self) -> httpx.URL:
        """The URL with its host replaced by the checked address, so no second lookup."""
        return self.url.copy_with(host=str(self.address), fragment=None)

    @property
    def host_header(self) -> str:
        return self.url.netloc.decode("ascii")

    @property
    def server_name(self) -> str:
        """For TLS: the certificate is checked against the name, not the address."""
        return self.url.raw_host.decode("ascii")

    @property
    def display(self) -> str:
        port = self.url.port or (443 if self.url.scheme == "https" else 80)
        host = f"[{self.address}]" if self.address.version == 6 else str(self.address)
        return f"{host}:{port}"


# 64:ff9b::/96 (RFC 6052): a NAT64 gateway forwards to the IPv4 address in the last
# 32 bits. ::/96 less :: and ::1: the deprecated IPv4-compatible form (RFC 4291).
NAT64 = ipaddress.ip_network("64:ff9b::/96")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """(scheme, IPv4 address) when an IPv6 address carries an IPv4 address that a
    translator or tunnel would deliver to: refusing 127.0.0.1 means nothing if
    2002:7f00:1:: or 64:ff9b::7f00:1 reaches it anyway."""
    if address.ipv4_mapped is not None:
        return "IPv4-mapped", address.ipv4_mapped
    if address in NAT64:
        return "NAT64", ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    if address.sixtofour is not None:
        return "6to4", address.sixtofour
    if address.teredo is not None:
        return "Teredo", address.teredo[1]  # the client's (NAT's) address, de-obfuscated
    if address in IPV4_COMPATIBLE and int(address) > 1:
        return "IPv4-compatible", ipaddress.IPv4Address(int(address))
    return None


def refusal_reason(address: IPAddress) -> str | None:
    """Why an address is internal, or None when it is a public unicast address.
    An IPv6 address carrying an IPv4 one is refused for whatever refuses that one."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = embedded_ipv4(address)
        if embedded is not None:
            scheme, inner = embedded
            reason = refusal_reason(inner)
            if reason is not None:
                return f"{reason} ({inner} in {scheme} form)"
            if scheme in ("IPv4-mapped", "NAT64"):
                return None  # it reaches exactly the public address it carries
            if scheme == "Teredo":
                # Tunnelled over UDP through relays: no receiver needs it, so none get it.
                return "a Teredo tunnel address"
            # 6to4 of a public address: a global address; IPv4-compatible: reserved.
    if address in METADATA_ADDRESSES:
        return METADATA
    checks = (
        ("is_unspecified", "an unspecified address"),
        ("is_loopback", "a loopback address"),
        ("is_link_local", "a link-local address"),
        ("is_multicast", "a multicast address"),
        ("is_private", "a private address"),
        ("is_reserved", "a reserved address"),
    )
    for attribute, reason in checks:
        if getattr(address, attribute):
            return reason
    if not address.is_global:
        return "not a public address"  # e.g. 100.64.0.0/10, shared by carriers
    return None


def resolve_destination(
    url: str,
    allowed_hosts: Sequence[str] = (),
    allowed_cidrs: Sequence[str] = (),
    resolver: Resolver = socket.getaddrinfo,
) -> Destination:
    """Resolve `url`'s host and return the address to connect to.

    Every address the name resolves to must pass, not just the first: a name that
    answers with one public and one internal address is refused.
    """
    parsed = httpx.URL(url)
    if parsed.scheme not in ("http", "https") or not parsed.raw_host:
        raise DestinationRefused("the URL is not an absolute http or https URL")
    host = parsed.raw_host.decode("ascii").lower()
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        infos = resolver(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as error:
        raise DestinationUnresolvable(f"{host} did not resolve: {error}") from error
    addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
    if not addresses:
        raise DestinationUnresolvable(f"{host} resolved to no address")
    for address in addresses:
        reason = _refused(host, address, allowed_hosts, allowed_cidrs)
        if reason is None:
            continue
        if reason.startswith(METADATA):
            raise DestinationRefused(f"{host} resolves to {address}, {reason}: never allowed")
        raise DestinationRefused(f"{host} resolves to {address}, {reason}, not allowlisted")
    return Destination(url=parsed, address=addresses[0])


def literal_address_refusal(
    url: str, allowed_hosts: Sequence[str] = (), allowed_cidrs: Sequence[str] = ()
) -> tuple[str, str] | None:
    """(address as written, reason) when `url` (well formed: `urls.validate_webhook_url`)
    names an IP address that `resolve_destination` would refuse at every attempt; None
    for a host name, which is only known at delivery time, and for an address that may
    be reached.

    For a check at submission: an address written in the URL cannot change, so refusing
    it then spares the caller a job whose every delivery or fetch is bound to fail."""
    host = httpx.URL(url).raw_host.decode("ascii").lower()
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    reason = _refused(host, address, allowed_hosts, allowed_cidrs)
    return None if reason is None else (host, reason)


def _refused(
    host: str, address: IPAddress, allowed_hosts: Sequence[str], allowed_cidrs: Sequence[str]
) -> str | None:
    """Why `host`, at `address`, may not be sent to: `refusal_reason`, unless an
    allowlist admits it (a metadata address whatever they say)."""
    reason = refusal_reason(address)
    if reason is None or reason.startswith(METADATA):
        return reason
    if host in {name.strip().lower() for name in allowed_hosts}:
        return None
    if any(address in ipaddress.ip_network(cidr, strict=False) for cidr in allowed_cidrs):
        return None
    return reason
