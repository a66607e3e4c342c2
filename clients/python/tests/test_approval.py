"""The approval verifier on the canonical-JSON vectors of
approval/testdata/ and on tokens the Go signer's rules refuse."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from yesguard import approval
from yesguard.testing import repo_root

VECTORS = json.loads((repo_root() / "approval" / "testdata" / "canonical-vectors.json").read_text(encoding="utf-8"))  # type: ignore[operator]


@pytest.mark.parametrize("v", VECTORS["vectors"], ids=[v["name"] for v in VECTORS["vectors"]])
def test_canonical_vectors(v: dict) -> None:
    canon = approval.canonical_json(v["input"])
    assert canon.decode("utf-8") == v["canonical"]
    assert hashlib.sha256(canon).hexdigest() == v["sha256"] == approval.args_hash(v["input"])


@pytest.mark.parametrize("v", VECTORS["rejected"], ids=[v["name"] for v in VECTORS["rejected"]])
def test_canonical_rejected(v: dict) -> None:
    with pytest.raises(approval.CanonicalError):
        approval.canonical_json(v["input"])


def test_decoded_arguments_hash_as_their_json() -> None:
    assert approval.args_hash({"amount": 120.5, "appeal_id": "A-17"}) == approval.args_hash('{"appeal_id":"A-17","amount":120.5}')
    assert approval.canonical_args({"n": 1, "f": 1.0, "big": 2**53 - 1}) == b'{"big":9007199254740991,"f":1,"n":1}'  # as a double, as JavaScript writes it
    # Past 2^53 - 1 two integers can be one double: refused, as the guard does.
    with pytest.raises(approval.CanonicalError):
        approval.canonical_args({"big": 2**60})
    assert approval.canonical_args(None) == b"{}"


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


class Signer:
    def __init__(self, kid: str = "k1") -> None:
        self.key, self.kid = Ed25519PrivateKey.generate(), kid
        x = self.key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.jwks = {"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": _b64(x), "alg": "EdDSA", "use": "sig"}]}

    def token(self, header: dict | None = None, **claims: object) -> str:
        now = int(time.time())
        c = {"iss": "yesguard", "jti": "01KB4Z3Q8K0V6YH1ZB2R9M7T4E", "iat": now, "exp": now + 60, "call_id": "c1",
             "tool": "submit_appeal", "args_sha256": approval.args_hash({"appeal_id": "A-17"})}
        c.update(claims)
        h = header or {"alg": "EdDSA", "kid": self.kid, "typ": approval.TOKEN_TYPE}
        signing = _b64(json.dumps(h).encode()) + "." + _b64(json.dumps(c).encode())
        return signing + "." + _b64(self.key.sign(signing.encode()))


def test_verifier_checks() -> None:
    s = Signer()
    v = approval.Verifier(s.jwks)
    c = v.verify_action(s.token(), tool="submit_appeal", args={"appeal_id": "A-17"}, call_id="c1")
    assert c.decision_id == "01KB4Z3Q8K0V6YH1ZB2R9M7T4E" and c.key_id == "k1"

    cases = [
        (s.token(exp=int(time.time()) - 60, iat=int(time.time()) - 120), approval.Expired, "approval_expired"),
        (s.token(iss="someone-else"), approval.WrongIssuer, "approval_invalid"),
        (s.token(header={"alg": "none", "kid": "k1", "typ": approval.TOKEN_TYPE}), approval.Algorithm, "approval_invalid"),
        (s.token(header={"alg": "EdDSA", "kid": "k1", "typ": approval.TOKEN_TYPE, "jku": "http://x"}), approval.Malformed, "approval_invalid"),
        (s.token(header={"alg": "EdDSA", "kid": "other", "typ": approval.TOKEN_TYPE}), approval.UnknownKey, "approval_invalid"),
        (Signer("k1").token(), approval.BadSignature, "approval_invalid"),
        (s.token(exp=int(time.time()) + 3600), approval.Malformed, "approval_invalid"),
        (s.token(jti="not a ulid!"), approval.Malformed, "approval_invalid"),
    ]
    for token, err, reason in cases:
        with pytest.raises(err) as got:
            v.verify(token)
        assert got.value.reason == reason
    with pytest.raises(approval.Mismatch):
        v.verify_action(s.token(), tool="submit_appeal", args={"appeal_id": "A-18"})
    with pytest.raises(approval.Mismatch):
        v.verify_action(s.token(), tool="cancel_appeal", args={"appeal_id": "A-17"})

    # One token, one spelling: a signature with its unused low bits set is refused.
    good = s.token()
    head, _, sig = good.rpartition(".")
    last = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    flipped = sig[:-1] + last[last.index(sig[-1]) ^ 1]
    with pytest.raises(approval.Malformed):
        v.verify(head + "." + flipped)
