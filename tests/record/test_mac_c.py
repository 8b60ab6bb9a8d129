"""The compiled MAC (record/_mac_c.c) is the Python reference's (the stdlib's HMAC-SHA256): on the
secrets and nonces ids are made of, on keys of every length about SHA-256's block (a key longer than
the block is hashed first), on messages that end on either side of a block's padding, and it refuses
what the reference refuses."""

from __future__ import annotations

import hashlib
import hmac
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wirecheck.contracts import native
from wirecheck.record._correlation import _HmacKeyed

_C = native("wirecheck.record._mac_c")
pytestmark = pytest.mark.skipif(
    _C is None, reason="the compiled twin is not built (test_native_built says why)"
)


def _expected(secret: bytes, kind: str, nonce: str) -> str:
    return hmac.new(secret, f"{kind}:{nonce}".encode("ascii"), hashlib.sha256).hexdigest()[:32]


@given(
    st.binary(min_size=0, max_size=300),
    st.sampled_from(["tap", "client", ""]),
    st.text(st.characters(max_codepoint=127), max_size=200),
)
def test_the_twin_gives_the_references_mac(secret: bytes, kind: str, nonce: str) -> None:
    assert _C is not None
    got = _C.Keyed(secret).mac(kind, nonce)
    assert got == _HmacKeyed(secret).mac(kind, nonce) == _expected(secret, kind, nonce)


@pytest.mark.parametrize("key_size", [0, 1, 32, 63, 64, 65, 128, 1000])
@pytest.mark.parametrize("message_size", [0, 54, 55, 56, 63, 64, 65, 119, 120, 200, 250])
def test_keys_and_messages_about_the_block_and_its_padding(key_size: int, message_size: int) -> None:
    assert _C is not None
    secret = bytes(range(256)) * 4
    secret = secret[:key_size]
    nonce = ("0123456789abcdef" * 20)[: max(message_size - 4, 0)]  # "tap:" and the nonce
    assert _C.Keyed(secret).mac("tap", nonce) == _expected(secret, "tap", nonce)


def test_one_keyed_state_serves_many_macs_unchanged() -> None:
    assert _C is not None
    keyed = _C.Keyed(b"s" * 32)
    first = keyed.mac("tap", "a" * 24)
    for i in range(50):
        keyed.mac("client", f"{i:024x}")
    assert keyed.mac("tap", "a" * 24) == first


def test_it_refuses_what_the_reference_refuses() -> None:
    assert _C is not None
    keyed, reference = _C.Keyed(b"k"), _HmacKeyed(b"k")
    for kind, nonce in (("tap", "é" * 24), ("ta\u0100", "0" * 24)):
        with pytest.raises(UnicodeEncodeError):
            reference.mac(kind, nonce)
        with pytest.raises(UnicodeEncodeError):
            keyed.mac(kind, nonce)
    with pytest.raises(TypeError):
        keyed.mac("tap", b"0" * 24)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _C.Keyed("a str secret")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="over 256 characters"):
        keyed.mac("tap", "0" * 300)  # ids are 24 digits: a message this long is never one


def test_the_twin_holds_no_memory_after_a_hundred_thousand_calls() -> None:
    assert _C is not None
    keyed = _C.Keyed(b"s" * 32)
    tracemalloc.start()
    try:
        for _ in range(10_000):  # warm up under tracing
            keyed.mac("tap", "0" * 24), _C.Keyed(b"k" * 80)
        before = tracemalloc.get_traced_memory()[0]
        for i in range(100_000):
            keyed.mac("tap", "0" * 24), _C.Keyed(b"k" * 80)
            if i % 1000 == 0:
                with pytest.raises(UnicodeEncodeError):
                    keyed.mac("tap", "é")
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 64 * 1024  # a leak of one object a call would be megabytes
