"""IPv6 forms that carry an IPv4 address are judged by the address they carry: a
refused IPv4 address stays refused however it is written."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

from pagemill.webhooks import ssrf

REFUSED_IPV4 = {
    "127.0.0.1": "loopback",
    "10.0.0.1": "private",
    "169.254.169.254": "metadata",
    "100.100.100.200": "metadata",
    "192.168.1.10": "private",
    "0.0.0.0": "unspecified",  # noqa: S104
}


def ipv6_forms(ipv4: str) -> dict[str, str]:
    """Each way of writing `ipv4` inside an IPv6 address, by scheme."""
    value = int(ipaddress.IPv4Address(ipv4))
    high, low = value >> 16, value & 0xFFFF
    # Teredo: server 65.54.227.120, flags 0x8000, port 0x63bf; the client is XOR-obfuscated.
    client = value ^ 0xFFFF_FFFF
    return {
        "IPv4-mapped": f"::ffff:{ipv4}",
        "NAT64": f"64:ff9b::{high:x}:{low:x}",
        "6to4": f"2002:{high:x}:{low:x}::1",
        "IPv4-compatible": f"::{high:x}:{low:x}",
        "Teredo": f"2001:0:4136:e378:8000:63bf:{client >> 16:x}:{client & 0xFFFF:x}",
    }


CASES = [
    (scheme, written, ipv4, reason)
    for ipv4, reason in REFUSED_IPV4.items()
    for scheme, written in ipv6_forms(ipv4).items()
    # 0.0.0.0 in IPv4-compatible form is ::, the unspecified address itself.
    if not (scheme == "IPv4-compatible" and int(ipaddress.IPv4Address(ipv4)) == 0)
]


@pytest.mark.parametrize(("scheme", "written", "ipv4", "reason"), CASES)
def test_refused_ipv4_addresses_stay_refused_inside_ipv6(
    scheme: str, written: str, ipv4: str, reason: str
) -> None:
    found = ssrf.refusal_reason(ipaddress.ip_address(written))
    assert found is not None and reason in found, (written, found)
    assert f"{ipv4} in {scheme} form" in found


def test_public_ipv4_inside_mapped_nat64_and_6to4_passes() -> None:
    forms = ipv6_forms("8.8.8.8")
    for scheme in ("IPv4-mapped", "NAT64", "6to4"):
        assert ssrf.refusal_reason(ipaddress.ip_address(forms[scheme])) is None, scheme


def test_teredo_and_ipv4_compatible_are_refused_whatever_they_carry() -> None:
    forms = ipv6_forms("8.8.8.8")
    assert ssrf.refusal_reason(ipaddress.ip_address(forms["Teredo"])) == "a Teredo tunnel address"
    compatible = ssrf.refusal_reason(ipaddress.ip_address(forms["IPv4-compatible"]))
    assert compatible is not None and "reserved" in compatible


def resolves_to(address: str) -> Any:
    def resolve(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))]

    return resolve


def test_metadata_in_any_ipv6_form_is_never_allowlisted() -> None:
    for written in ipv6_forms("169.254.169.254").values():
        with pytest.raises(ssrf.DestinationRefused, match="never allowed"):
            ssrf.resolve_destination(
                "http://hooks.example.com/",
                ["hooks.example.com"],
                ["::/0"],
                resolver=resolves_to(written),
            )


def test_loopback_in_6to4_form_is_refused_unless_allowlisted() -> None:
    written = ipv6_forms("127.0.0.1")["6to4"]
    with pytest.raises(ssrf.DestinationRefused, match=r"127\.0\.0\.1 in 6to4 form"):
        ssrf.resolve_destination("http://hooks.example.com/", resolver=resolves_to(written))
    allowed = ssrf.resolve_destination(
        "http://hooks.example.com/", ["hooks.example.com"], resolver=resolves_to(written)
    )
    assert str(allowed.address) == written
