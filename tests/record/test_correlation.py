"""Correlation ids: the MAC is HMAC-SHA256 (SHA-256 states fed the key's HMAC pads, kept per
secret and copied), and ids verify only under their own secret and kind."""

from __future__ import annotations

import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from wirecheck.record._correlation import Correlator, _mac, mint_correlation


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
