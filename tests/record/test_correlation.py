"""Correlation ids: the MAC is HMAC-SHA256 (the stdlib's HMAC keyed once per secret and copied),
ids verify only under their own secret and kind, and nonces are fresh in a forked child too."""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from wirecheck.record import _correlation
from wirecheck.record._correlation import Correlator, _mac, _nonce, mint_correlation


@given(st.binary(min_size=1, max_size=200), st.text("0123456789abcdef", min_size=1, max_size=40))
def test_the_mac_is_hmac_sha256(secret: bytes, nonce: str) -> None:
    for kind in ("tap", "client"):
        expected = hmac.new(secret, f"{kind}:{nonce}".encode(), hashlib.sha256).hexdigest()[:32]
        assert _mac(secret, nonce, kind) == expected
        assert _mac(secret, nonce, kind) == expected  # again, from the keyed HMAC kept


def test_ids_verify_under_their_secret_and_kind_only() -> None:
    mine, other = Correlator(b"s" * 32), Correlator(b"t" * 32)
    tap_id, client_id = mine.mint(), mint_correlation(b"s" * 32)
    assert mine.minted_by(tap_id) == "tap" and mine.minted_by(client_id) == "client"
    assert other.minted_by(tap_id) is None and other.minted_by(client_id) is None
    nonce, mac = tap_id.split(".")
    assert mine.minted_by(f"{nonce}.{mac[:-1]}{'0' if mac[-1] != '0' else '1'}") is None


def test_nonces_are_fresh_hex_and_a_forked_child_draws_its_own() -> None:
    nonces = [_nonce() for _ in range(3 * _correlation._POOLED + 5)]
    assert len(set(nonces)) == len(nonces)
    assert all(len(n) == 24 and int(n, 16) >= 0 for n in nonces)
    _nonce()  # the pool holds nonces when the process forks
    parent_next = list(_correlation._POOL)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first nonce, then out without pytest's teardown
        try:
            os.write(write, _nonce().encode())
        finally:
            os._exit(0)
    os.close(write)
    child = os.read(read, 100).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert len(child) == 24 and child not in parent_next and child not in nonces


def test_nonces_begin_with_the_time_so_ids_made_later_sort_later() -> None:
    """A nonce is the clock's milliseconds in 11 hex digits, then 13 random ones: ids made in later
    milliseconds sort after earlier ones (a store's indexes take them at their end), and ids made in
    one millisecond differ in their random part."""
    ms = 1_796_199_188_000  # 2026-12-02, in milliseconds
    made = [_nonce(lambda t=t: t * 1_000_000) for t in (ms, ms, ms + 1, ms + 1000, ms + 3_600_000)]
    assert [n[:11] for n in made] == [f"{t:011x}" for t in (ms, ms, ms + 1, ms + 1000, ms + 3_600_000)]
    assert made[0] != made[1] and made[0][:11] == made[1][:11]
    assert sorted(made[1:]) == made[1:] and min(made[:2]) < made[2]
    assert all(len(n) == 24 and int(n, 16) >= 0 for n in made)
    # a clock set before 2004 (a machine that lost its time) still gives 24 digits, padded
    assert _nonce(lambda: 5_000_000)[:11] == "00000000005" and len(_nonce(lambda: 0)) == 24
    # an id minted with a nonce of the time still verifies, and a tap's exchange id carries one whole
    corr = Correlator(b"secret")
    assert corr.minted_by(corr.mint()) == "tap"
    assert len(corr.nonce()) == 24
    # minted with a nonce given (the tap's exchange id's), whether or not the caller sent an id
    given = corr.nonce()
    for ids in ([], ["forged.0"], [mint_correlation(b"other")]):
        sent, recorded = corr.take(ids, caller=True, nonce=given)
        assert sent == recorded and sent is not None and sent.startswith(given + ".")
        assert corr.minted_by(sent) == "tap"


def test_the_keyed_state_is_the_stdlibs_hmac_with_or_without_openssl(monkeypatch: Any) -> None:
    """The MAC is copied from OpenSSL's HMAC inside ``hmac.new`` where it has one, and from the
    ``hmac.HMAC`` itself where it has none (Python's own HMAC over hashlib): the same MAC."""
    secret, message = b"k" * 80, b"tap:0123456789abcdef01234567"
    expected = hmac.new(secret, message, hashlib.sha256).hexdigest()
    made = hmac.new

    def without_openssl(key: bytes, msg: bytes | None = None, digestmod: Any = "") -> hmac.HMAC:
        def sha256(data: bytes = b"") -> Any:  # a digest OpenSSL's HMAC does not take
            return hashlib.sha256(data)

        return made(key, msg, sha256)

    for new in (made, without_openssl):
        monkeypatch.setattr(_correlation.hmac, "new", new)
        keyed = _correlation._keyed(secret)
        assert isinstance(keyed, hmac.HMAC) == (new is without_openssl)
        for _ in range(2):
            copy = keyed.copy()
            copy.update(message)
            assert copy.hexdigest() == expected


def test_a_tap_mints_its_own_ids_as_mint_does() -> None:
    """``Correlator.mint`` (the keyed HMAC held by the object) gives the MAC ``_mac`` gives."""
    secret = b"s" * 70
    corr = Correlator(secret)
    for _ in range(3):
        nonce, mac = corr.mint().split(".")
        assert mac == _mac(secret, nonce, "tap") and corr.minted_by(f"{nonce}.{mac}") == "tap"
