"""API keys: `pm_<prefix>_<secret>`. Only the prefix and a SHA-256 digest are stored.

The secret has 256 bits of entropy, so a fast hash is enough: there is nothing
to brute-force that a slow password hash would protect.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

KEY_SCHEME = "pm"


@dataclass(frozen=True)
class IssuedKey:
    plaintext: str  # shown to the operator once, never stored
    prefix: str
    sha256: str


def issue_key() -> IssuedKey:
    prefix = secrets.token_hex(6)
    plaintext = f"{KEY_SCHEME}_{prefix}_{secrets.token_urlsafe(32)}"
    return IssuedKey(plaintext=plaintext, prefix=prefix, sha256=digest(plaintext))


def digest(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def prefix_of(plaintext: str) -> str | None:
    parts = plaintext.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_SCHEME or not parts[1]:
        return None
    return parts[1]


def matches(plaintext: str, stored_sha256: str) -> bool:
    # Constant-time, so response timing does not reveal how much of a key was right.
    return hmac.compare_digest(digest(plaintext), stored_sha256)
