"""The ``x-wirecheck-id`` correlation, made unforgeable.

The caller tap used to keep whatever id a caller sent, so two requests sharing one id paired with each
other's engine side and produced false gateway findings. Now an id is ``NONCE.MAC``: a random nonce
and its HMAC-SHA256 under a secret that callers never see. The caller tap replaces every id it cannot
verify (or has seen before) with one it mints, and the engine tap records only ids that verify, so a
forged id pairs with nothing and pairing falls back to the request fingerprint.

The secret is random per process, so the taps of one ``wirecheck proxy`` (and in-process users such as
``accept --via-proxy``, which mint their ids with :func:`mint_correlation`) agree without setup.
Replicas in several processes that share one store give the same secret to each
(``--correlation-secret`` or ``WIRECHECK_CORRELATION_SECRET``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections import OrderedDict

__all__ = ["CORRELATION_HEADER", "SECRET_ENV", "Correlator", "correlation_secret", "mint_correlation"]

#: the header both taps read and the caller tap sets; gateways may drop it (pairing then falls back to
#: the request fingerprint)
CORRELATION_HEADER = "x-wirecheck-id"
SECRET_ENV = "WIRECHECK_CORRELATION_SECRET"
_PROCESS_SECRET = secrets.token_bytes(32)
_NONCE_HEX = 24
_MAC_HEX = 32
#: ids a caller tap remembers, to refuse a verified id sent a second time (a replayed id pairs wrongly too)
_SEEN_MAX = 65536


def correlation_secret(given: str | None = None) -> bytes:
    """The secret: ``given``, else the environment's, else this process's random one."""
    text = given if given is not None else os.environ.get(SECRET_ENV)
    if text:
        return text.encode("utf-8")
    return _PROCESS_SECRET


def _mac(secret: bytes, nonce: str) -> str:
    return hmac.new(secret, nonce.encode("ascii"), hashlib.sha256).hexdigest()[:_MAC_HEX]


def mint_correlation(secret: bytes | None = None) -> str:
    """A fresh id that the taps of this process (or of replicas sharing the secret) accept."""
    nonce = secrets.token_hex(_NONCE_HEX // 2)
    return f"{nonce}.{_mac(secret or correlation_secret(), nonce)}"


class Correlator:
    """Mints and verifies ids under one secret; a caller tap also remembers the ids it accepted."""

    __slots__ = ("_seen", "secret")

    def __init__(self, secret: bytes) -> None:
        self.secret = secret
        self._seen: OrderedDict[str, None] = OrderedDict()

    def mint(self) -> str:
        return mint_correlation(self.secret)

    def verifies(self, value: str | None) -> bool:
        if value is None or len(value) != _NONCE_HEX + 1 + _MAC_HEX or value[_NONCE_HEX] != ".":
            return False
        nonce, mac = value[:_NONCE_HEX], value[_NONCE_HEX + 1 :]
        try:
            expected = _mac(self.secret, nonce)
        except UnicodeEncodeError:
            return False
        return hmac.compare_digest(expected, mac)

    def for_caller(self, incoming: str | None) -> str:
        """The id a caller tap sends on: the caller's own only when it verifies and is new (an
        in-process client that minted it, e.g. ``accept --via-proxy``), else a fresh one."""
        if incoming is not None and self.verifies(incoming) and incoming not in self._seen:
            self._seen[incoming] = None
            if len(self._seen) > _SEEN_MAX:
                self._seen.popitem(last=False)
            return incoming
        return self.mint()

    def stamp(
        self, headers: list[tuple[str, str]], *, caller: bool
    ) -> tuple[list[tuple[str, str]], str | None]:
        """One tap's rule on a request's headers: the headers to send on, and the correlation id to
        record. The caller tap sends exactly one id, its own unless the caller's verifies and is new;
        the engine tap sends the headers as they are and records the id only when
        it verifies (a forged one correlates nothing: pairing falls back to the fingerprint)."""
        ids = [v for k, v in headers if k.lower() == CORRELATION_HEADER]
        sent = ids[0] if len(ids) == 1 else None
        if not caller:
            return headers, sent if self.verifies(sent) else None
        corr = self.for_caller(sent)
        return [
            *((k, v) for k, v in headers if k.lower() != CORRELATION_HEADER),
            (CORRELATION_HEADER, corr),
        ], corr
