"""What a webhook URL must look like: one check, made at submission and again before
every delivery attempt, so a URL the API accepts is one the HTTP client can send to.

The check is about form only. Where the URL may point is decided at delivery time,
on the addresses its host resolves to then (see `ssrf`), because DNS can change.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

import httpx

# The endpoint table's unique index needs a bound; 2 KiB is ample for a callback.
MAX_URL_CHARS = 2048
MAX_HOST_CHARS = 253  # the DNS limit for a name
_LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?")
# A last label that is a number makes the host an IPv4 address to the resolver
# (inet_aton): 0x7f.1, 2130706433 and 0251.0376.0251.0376 are all addresses.
_NUMERIC_LABEL = re.compile(r"(0x[0-9a-f]*|[0-9]+)")


class InvalidWebhookUrl(ValueError):
    """A webhook URL no attempt could ever deliver to; `message` says why, for a person."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def validate_webhook_url(url: str) -> str:
    """The URL as it will be stored and sent to (surrounding blanks removed), or
    InvalidWebhookUrl with a sentence saying what is wrong with it."""
    url = url.strip()
    if not url:
        raise InvalidWebhookUrl("The webhook_url is empty.")
    if len(url) > MAX_URL_CHARS:
        raise InvalidWebhookUrl(f"The webhook_url must be at most {MAX_URL_CHARS} characters.")
    if any(char.isspace() or not char.isprintable() for char in url):
        raise InvalidWebhookUrl(
            "The webhook_url must not contain spaces, line breaks or other control characters."
        )
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, UnicodeError) as error:
        # httpx refuses some numeric hosts (0177.0.0.1) itself; say what they denote.
        host = _host_as_written(url)
        if host is not None and _NUMERIC_LABEL.fullmatch(host.removesuffix(".").split(".")[-1]):
            _check_ipv4(host)
        raise InvalidWebhookUrl(f"The webhook_url is not a valid URL: {error}.") from error
    if parsed.scheme not in ("http", "https") or not parsed.raw_host:
        raise InvalidWebhookUrl("The webhook_url must be an absolute http or https URL.")
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        raise InvalidWebhookUrl("The webhook_url's port must be between 1 and 65535.")
    _check_host(parsed.raw_host.decode("ascii").lower())
    return url


def _check_host(host: str) -> None:
    if ":" in host:  # an IPv6 literal; httpx has checked its syntax
        if "%" in host:
            raise InvalidWebhookUrl("The webhook_url's IPv6 address must not name a zone.")
        return
    if len(host) > MAX_HOST_CHARS:
        raise InvalidWebhookUrl(
            f"The webhook_url's host is longer than {MAX_HOST_CHARS} characters."
        )
    labels = host.removesuffix(".").split(".")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        _check_ipv4(host)
        return
    if not all(_LABEL.fullmatch(label) for label in labels):
        raise InvalidWebhookUrl(
            f"The webhook_url's host {host!r} is not a valid host name or IP address."
        )


def _host_as_written(url: str) -> str | None:
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


def _check_ipv4(host: str) -> None:
    """Only the usual dotted-decimal form: the legacy octal, hex and short forms denote
    addresses nobody reading the URL would guess, so they are refused, not translated."""
    try:
        ipaddress.IPv4Address(host)
        return
    except ValueError:
        pass
    try:
        meant = socket.inet_ntoa(socket.inet_aton(host.removesuffix(".")))
    except OSError:
        raise InvalidWebhookUrl(
            f"The webhook_url's host {host!r} is not a valid host name or IP address."
        ) from None
    raise InvalidWebhookUrl(
        f"The webhook_url's host {host!r} is an IPv4 address in a legacy form; "
        f"write it in dotted decimal ({meant}) if that is the address you mean."
    )
