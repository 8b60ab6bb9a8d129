"""The ``x-wirecheck-id`` correlation, made unforgeable.

The caller tap used to keep whatever id a caller sent, so two requests sharing one id paired with each
other's engine side and produced false gateway findings. Now an id is ``NONCE.MAC``: a random nonce
and its HMAC-SHA256 under a secret that callers never see. The caller tap replaces every id it cannot
verify (or has seen before) with one it mints, and the engine tap records only ids that verify, so a
forged id pairs with nothing and pairing falls back to the request fingerprint.

An id says who minted it, under the MAC: the caller tap's own (``tap``) or an in-process client's that
chooses its id (``client``: :func:`mint_correlation`). The caller tap takes only ``client`` ids from
callers. An id it minted itself travels on to the gateway and the engine, where a caller may read it
(a gateway that echoes headers or logs them); sent back once by another caller, it would put two
requests on one id, and ``check`` would pair the victim's exchange with the wrong engine side. So its
own ids are never accepted back, however long ago they were minted (no memory to overflow), and the
engine tap accepts both kinds.

The secret is random per process, so the taps of one ``wirecheck proxy`` (and in-process users such as
``accept --via-proxy``, which mint their ids with :func:`mint_correlation`) agree without setup.
Replicas in several processes that share one store give the same secret to each
(``--correlation-secret`` or ``WIRECHECK_CORRELATION_SECRET``).
"""

from __future__ import annotations

import hmac
import os
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Protocol

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


#: who minted an id: the caller tap itself, or an in-process client choosing its own
_TAP, _CLIENT = "tap", "client"


def _mac(secret: bytes, nonce: str, kind: str) -> str:
    """HMAC-SHA256 of ``kind:nonce`` under ``secret``, in hex, cut to ``_MAC_HEX``."""
    message = f"{kind}:{nonce}".encode("ascii")
    keyed = _KEYED.get(secret)
    if keyed is None:
        keyed = _keyed(secret)
        if len(_KEYED) < 16:
            _KEYED[secret] = keyed
    copy = keyed.copy()
    copy.update(message)
    return copy.hexdigest()[:_MAC_HEX]


def _keyed(secret: bytes) -> _Keyed:
    """An HMAC-SHA256 keyed with ``secret`` and fed nothing: the OpenSSL HMAC that ``hmac.new``
    wraps where Python has one (its ``copy``, ``update`` and ``hexdigest`` are then one C call each,
    not a Python method around the C one: about 4k instructions an id less), else the ``hmac.HMAC``."""
    made = hmac.new(secret, digestmod="sha256")
    inner: _Keyed | None = getattr(made, "_hmac", None)
    return inner if inner is not None else made


class _Keyed(Protocol):
    def copy(self) -> _Keyed: ...
    def update(self, message: bytes, /) -> None: ...
    def hexdigest(self) -> str: ...


#: secret -> an HMAC keyed with it and fed nothing, copied for each id: ``hmac.new`` sets OpenSSL's
#: HMAC up (its digest looked up) on every call, a tenth of a tap's own instructions an exchange for
#: its two ids' MACs
_KEYED: dict[bytes, _Keyed] = {}


def _nonce(clock: Callable[[], int] = time.time_ns) -> str:
    """A fresh nonce's hex: the time in milliseconds (``_TIME_HEX`` digits: ``clock`` is nanoseconds
    since the epoch), then ``_RANDOM_HEX`` random digits. Time first, so that the ids made of it come
    in about the order they were made: a store's indexes of exchange ids and correlations (B-trees)
    then take each batch's new keys at their right-hand end, not at a random leaf each. With random
    keys every exchange dirtied a leaf page of each index of its own, written whole to the WAL and
    again at the checkpoint: half the store writer's CPU an exchange (benchmarks/store_write.py). Two
    ids can be equal only when made in the same millisecond, where 52 random bits keep them apart
    (ids wholly random over 64 bits collided by the birthday bound as a store grew).

    The random digits come from a pool of the operating system's random bytes, drawn 256 nonces at a
    time (``os.urandom(12).hex()`` was a system call and about 2.5k instructions an id). The pool is
    emptied in a forked child, which must never hand out its parent's nonces, and a deque's pop and
    extend are atomic, so threads never share one."""
    try:
        random = _POOL.pop()
    except IndexError:
        step = 2 * ((_RANDOM_HEX + 1) // 2)  # whole bytes a nonce: its digits, and one spare if odd
        block = os.urandom(step // 2 * _POOLED).hex()
        _POOL.extend([block[i : i + _RANDOM_HEX] for i in range(0, len(block), step)])
        random = _POOL.pop()
    ms = clock() // 1_000_000
    # ``hex`` and a slice: an f-string's format spec was parsed on every call (2.4k instructions of
    # 7.7k); a clock before 2004 (or past 2527) is padded (or cut) to the width
    digits = hex(ms)[2:]
    if len(digits) != _TIME_HEX:
        digits = f"{ms % (1 << 4 * _TIME_HEX):0{_TIME_HEX}x}"
    return digits + random


#: a nonce's digits: the time in milliseconds (11 hex digits last until the year 2527), then random
_TIME_HEX = 11
_RANDOM_HEX = _NONCE_HEX - _TIME_HEX
#: nonces drawn at a time, and the random parts not yet handed out
_POOLED = 256
_POOL: deque[str] = deque()
os.register_at_fork(after_in_child=_POOL.clear)


def _mint(secret: bytes, kind: str) -> str:
    nonce = _nonce()
    return f"{nonce}.{_mac(secret, nonce, kind)}"


def mint_correlation(secret: bytes | None = None) -> str:
    """A fresh id for an in-process client to send (``accept --via-proxy``, the scenario generator):
    the caller tap of this process (or of replicas sharing the secret) takes it once."""
    return _mint(secret or correlation_secret(), _CLIENT)


class Correlator:
    """Mints and verifies ids under one secret; a caller tap also remembers the ids it accepted."""

    __slots__ = ("_keyed", "_seen", "secret")

    def __init__(self, secret: bytes) -> None:
        self.secret = secret
        self._seen: OrderedDict[str, None] = OrderedDict()
        #: the HMAC keyed with ``secret`` that the tap's own ids' MACs are copied from (``_mac``'s)
        self._keyed = _keyed(secret)

    def mint(self, nonce: str | None = None) -> str:
        """An id of the caller tap's own, which it never takes back from a caller: ``_mint`` for
        the tap's kind, with the keyed HMAC this object holds (once an exchange). ``nonce``: one from
        :meth:`nonce` that no other correlation id has (the tap's exchange id is made of the nonce
        its correlation id is minted with: one nonce an exchange, not two); a fresh one if None."""
        if nonce is None:
            nonce = _nonce()
        mac = self._keyed.copy()
        mac.update(f"{_TAP}:{nonce}".encode("ascii"))
        return f"{nonce}.{mac.hexdigest()[:_MAC_HEX]}"

    @staticmethod
    def nonce() -> str:
        """A fresh nonce (``_nonce``: 24 hex digits, the time first): a tap's exchange ids are made
        of one too, which keeps them in about the order they were made, and apart."""
        return _nonce()

    def minted_by(self, value: str | None) -> str | None:
        """``"tap"`` or ``"client"`` for an id minted under this secret, else None."""
        if value is None or len(value) != _NONCE_HEX + 1 + _MAC_HEX or value[_NONCE_HEX] != ".":
            return None
        nonce, mac = value[:_NONCE_HEX], value[_NONCE_HEX + 1 :]
        for kind in (_TAP, _CLIENT):
            try:
                expected = _mac(self.secret, nonce, kind)
            except UnicodeEncodeError:
                return None
            if hmac.compare_digest(expected, mac):
                return kind
        return None

    def verifies(self, value: str | None) -> bool:
        return self.minted_by(value) is not None

    def for_caller(self, incoming: str | None, nonce: str | None = None) -> str:
        """The id a caller tap sends on: the caller's own only when an in-process client minted it
        (``mint_correlation``, e.g. ``accept --via-proxy``) and it is new, else a fresh one. An id
        this tap minted is never taken back, so a caller that read one cannot borrow a victim's."""
        if incoming is not None and self.minted_by(incoming) == _CLIENT and incoming not in self._seen:
            self._seen[incoming] = None
            if len(self._seen) > _SEEN_MAX:
                self._seen.popitem(last=False)
            return incoming
        return self.mint(nonce)

    def stamp(
        self, headers: list[tuple[str, str]], *, caller: bool
    ) -> tuple[list[tuple[str, str]], str | None]:
        """One tap's rule on a request's headers: the headers to send on, and the correlation id to
        record. The caller tap sends exactly one id, its own unless the caller's is a client's that
        verifies and is new; the engine tap sends the headers as they are and records the id only when
        it verifies (a forged one correlates nothing: pairing falls back to the fingerprint)."""
        ids = [v for k, v in headers if k.lower() == CORRELATION_HEADER]
        sent, recorded = self.take(ids, caller=caller)
        if sent is None:
            return headers, recorded
        return [
            *((k, v) for k, v in headers if k.lower() != CORRELATION_HEADER),
            (CORRELATION_HEADER, sent),
        ], recorded

    def take(
        self, ids: list[str], *, caller: bool, nonce: str | None = None
    ) -> tuple[str | None, str | None]:
        """``stamp``'s rule on the ids a request carried (``ids``: its correlation headers' values,
        in order): the one id a caller tap sends in place of all of them (None for the engine tap,
        which sends the headers as they are), and the id to record. ``nonce``: what an id the caller
        tap mints is made of (``mint``)."""
        sent = ids[0] if len(ids) == 1 else None
        if not caller:
            return None, sent if self.verifies(sent) else None
        # no id from the caller (the usual case): ``for_caller``'s fresh one without its call
        corr = self.for_caller(sent, nonce) if sent is not None else self.mint(nonce)
        return corr, corr
