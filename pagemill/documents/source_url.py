"""What a source_url may be: an https URL (a presigned link, say), or s3://bucket/key in
a bucket the deployment is configured to read. Checked here for its form; at submit an
https URL written with an IP address is also held to the SSRF guard's rules
(pagemill.jobs.service). Where a host name leads is decided when the worker fetches it,
on the addresses it resolves to then, by the webhooks' SSRF guard
(pagemill.webhooks.ssrf).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from pagemill.webhooks.urls import MAX_URL_CHARS, InvalidWebhookUrl, validate_webhook_url


class InvalidSourceUrl(ValueError):
    """A source_url no fetch could use; `code` is stable, `message` is for a person."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class SourceUrl:
    url: str
    # For s3://bucket/key; None for https.
    bucket: str | None = None
    key: str | None = None


def parse_source_url(url: str, readable_buckets: Sequence[str]) -> SourceUrl:
    url = url.strip()
    if not url:
        raise InvalidSourceUrl("invalid_source_url", "The source_url is empty.")
    if len(url) > MAX_URL_CHARS:
        raise InvalidSourceUrl(
            "invalid_source_url", f"The source_url must be at most {MAX_URL_CHARS} characters."
        )
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "s3":
        return _parse_s3(url, readable_buckets)
    if scheme != "https":
        raise InvalidSourceUrl(
            "source_url_scheme_not_allowed",
            "The source_url must be an https:// URL or an s3://bucket/key this deployment "
            f"may read, not {scheme + ':' if scheme else 'a relative URL'}.",
        )
    try:
        # The same form rules as a webhook URL: one definition of a usable https URL.
        return SourceUrl(validate_webhook_url(url))
    except InvalidWebhookUrl as invalid:
        raise InvalidSourceUrl(
            "invalid_source_url", invalid.message.replace("webhook_url", "source_url")
        ) from None


S3_FORM = "An s3 source_url must read s3://bucket/key, with nothing after."


def _parse_s3(url: str, readable_buckets: Sequence[str]) -> SourceUrl:
    # The key is taken as written, so a space may be part of it; a NUL cannot be
    # stored, and no key a person means holds a line break or other control character.
    if not url.isprintable():
        raise InvalidSourceUrl(
            "invalid_source_url",
            "The source_url must not contain line breaks or other control characters.",
        )
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed "[" or "]" in the bucket
        raise InvalidSourceUrl("invalid_source_url", S3_FORM) from None
    bucket, key = parts.netloc, parts.path.removeprefix("/")
    if not bucket or not key or parts.query or parts.fragment:
        raise InvalidSourceUrl("invalid_source_url", S3_FORM)
    # The S3 client refuses such a key at fetch time: "../" would step out of the bucket.
    if any(segment in (".", "..") for segment in key.split("/")):
        raise InvalidSourceUrl(
            "invalid_source_url", "An s3 source_url's key must not have '.' or '..' segments."
        )
    if bucket not in readable_buckets:
        raise InvalidSourceUrl(
            "source_bucket_not_readable",
            f"This deployment is not configured to read the bucket {bucket!r}.",
        )
    return SourceUrl(url, bucket, key)
