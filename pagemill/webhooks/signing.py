"""Standard Webhooks 1.0 signatures: `v1,` + base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`.

Secrets look like `whsec_<base64 of 32 random bytes>`. They must be readable to sign,
so unlike API keys they cannot be stored as digests (see the README's trade-off).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"  # noqa: S105  (a prefix, not a secret)
SECRET_BYTES = 32  # the spec asks for 24 to 64 random bytes


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def _key(secret: str) -> bytes:
    raw = secret.removeprefix(SECRET_PREFIX)
    return base64.b64decode(raw + "=" * (-len(raw) % 4))


def sign(secret: str, message_id: str, timestamp: int, body: str) -> str:
    signed = f"{message_id}.{timestamp}.{body}".encode()
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_header(signing_secrets: list[str], message_id: str, timestamp: int, body: str) -> str:
    """One signature per secret, space-separated: during a rotation a receiver that
    still holds the previous secret and one that has the new one both verify."""
    return " ".join(sign(secret, message_id, timestamp, body) for secret in signing_secrets)


def headers(
    signing_secrets: list[str], message_id: str, timestamp: int, body: str
) -> dict[str, str]:
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature_header(signing_secrets, message_id, timestamp, body),
    }
