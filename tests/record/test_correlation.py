"""Correlation ids: the MAC is HMAC-SHA256 (SHA-256 states fed the key's HMAC pads, kept per
secret and copied), and ids verify only under their own secret and kind. Every test runs with the
compiled twin of the MAC in use and on its Python reference (``both_paths``); the twin is held to
hmac for keys and messages of every length."""

from __future__ import annotations

import hashlib
import hmac
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wirecheck.contracts import native
from wirecheck.contracts._native import PURE_PYTHON
from wirecheck.record import _correlation
from wirecheck.record._correlation import Correlator, _mac, _nonce, mint_correlation

pytestmark = pytest.mark.usefixtures("both_paths")


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


def test_the_compiled_mac_is_built_and_in_use() -> None:
    # a silent fall back to Python (no compiler at install, a build that broke) would hide here
    twin = native("wirecheck.record._correlation_c")
    assert PURE_PYTHON or twin is not None


@given(st.binary(max_size=200), st.binary(max_size=300))
def test_the_twin_is_hmac_sha256_for_keys_and_messages_of_every_length(key: bytes, message: bytes) -> None:
    twin = native("wirecheck.record._correlation_c")
    if twin is None:
        pytest.skip("the compiled twin is off or not built")
    # every length a block's padding divides differently: 55, 56, 63, 64 bytes and past two blocks
    for m in (message, message[:55], message.ljust(56, b"x"), message.ljust(64, b"y")):
        assert twin.mac_hex(twin.keyed(key), m) == hmac.new(key, m, hashlib.sha256).hexdigest()


def test_the_twin_refuses_what_is_not_its_keyed_states() -> None:
    twin = native("wirecheck.record._correlation_c")
    if twin is None:
        pytest.skip("the compiled twin is off or not built")
    states = twin.keyed(b"k")
    for bad in (b"", states[:-1], states + b"x", "x" * 64, None):
        with pytest.raises((ValueError, TypeError)):
            twin.mac_hex(bad, b"m")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        twin.mac_hex(states, "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        twin.mac_hex(states)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        twin.keyed("text")  # type: ignore[arg-type]


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
