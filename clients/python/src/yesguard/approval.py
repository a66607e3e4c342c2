"""Verify a yesguard approval in a Python backend (docs/approvals.md).

The system of record (the booking, payment or claims backend) checks an
ALLOW's approval for itself, offline, with the guard's public keys (its
JWKS, at ``/.well-known/jwks.json`` on the guard's HTTP address), against
the action it is about to execute; then it calls Guard.redeem to claim the
action once. This module needs the ``cryptography`` package (Ed25519); the
rest of yesguard does not.

Rules that hold (docs/approvals.md, "Checks a verifier makes"):
- A token is accepted only when every check passes: its form (compact JWS,
  canonical base64url, at most 8 KiB), its header (exactly alg EdDSA, kid
  and typ yesguard-approval+jwt), a known key, the Ed25519 signature, the
  claims (every one present and well formed, a life of at most max_ttl,
  not issued in the future beyond the skew), the issuer, the expiry, and
  the action (tool, canonical arguments' hash, and the call when given).
- Each refusal raises a subclass of ApprovalError whose ``reason`` is the
  guard's Redeem reason for it: "approval_expired", "approval_mismatch",
  or "approval_invalid".
- The arguments are hashed by the canonical-JSON rule, passing
  approval/testdata/canonical-vectors.json; JSON the guard refuses is
  refused here too (canonical_json).
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import hashlib
import json
import math
import re
import time
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Type, Union

TOKEN_TYPE = "yesguard-approval+jwt"
DEFAULT_ISSUER = "yesguard"
MAX_TOKEN_BYTES = 8 << 10
MAX_ARGS_BYTES = 64 << 10


class ApprovalError(Exception):
    """The approval does not authorise the action."""

    reason = "approval_invalid"


class Malformed(ApprovalError):
    pass


class Algorithm(ApprovalError):
    pass


class BadSignature(ApprovalError):
    pass


class UnknownKey(BadSignature):
    pass


class WrongIssuer(ApprovalError):
    pass


class Expired(ApprovalError):
    reason = "approval_expired"


class Mismatch(ApprovalError):
    reason = "approval_mismatch"


class CanonicalError(ValueError):
    """Arguments the canonical rule (and the guard) refuses."""


# ---- canonical JSON ---------------------------------------------------------

#: The largest magnitude a number may have (approval.MaxExactInteger in Go).
MAX_EXACT_INTEGER = 2**53 - 1


def _number(x: float) -> str:
    """x laid out as ECMAScript's Number::toString does."""
    if x == 0:
        return "-0" if math.copysign(1, x) < 0 else "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exp = repr(abs(x)).partition("e")
    whole, _, frac = mantissa.partition(".")
    frac = "" if frac == "0" else frac
    all_digits = whole + frac
    digits = all_digits.lstrip("0")
    n = len(whole) + (int(exp) if exp else 0) - (len(all_digits) - len(digits))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        s = digits + "0" * (n - k)
    elif 0 < n <= 21:
        s = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        s = "0." + "0" * -n + digits
    else:
        e = n - 1
        s = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + s


def _string(s: str) -> str:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as err:
        raise CanonicalError("a string holds a lone surrogate") from err
    return json.dumps(s, ensure_ascii=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _canonical(v: Any, depth: int = 0) -> str:
    if depth > 100:
        raise CanonicalError("nested too deep")
    if v is None or isinstance(v, bool):
        return json.dumps(v)
    if isinstance(v, (int, float)):
        f = float(v)  # every number is a double, as in the guard
        if not math.isfinite(f):
            raise CanonicalError(f"{v!r} is outside the double range")
        # Past 2^53 - 1 two integers can be one double: the guard refuses
        # such numbers, and so does this rule (send them as strings).
        if abs(v) > MAX_EXACT_INTEGER:
            raise CanonicalError(f"{v!r} is beyond +-(2^53 - 1): send it as a string, with its exact digits")
        return _number(f)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_canonical(x, depth + 1) for x in v) + "]"
    if isinstance(v, Mapping):
        for k in v:
            if not isinstance(k, str):
                raise CanonicalError(f"key {k!r} is not a string")
        # Python orders str by code point: the order of the UTF-8 bytes.
        return "{" + ",".join(_string(k) + ":" + _canonical(v[k], depth + 1) for k in sorted(v)) + "}"
    raise CanonicalError(f"a {type(v).__name__} is not a JSON value")


def canonical_args(args: Optional[Mapping[str, Any]]) -> bytes:
    """The canonical JSON of decoded arguments (None is {})."""
    if args is None:
        return b"{}"
    if not isinstance(args, Mapping):
        raise CanonicalError("the arguments are one JSON object")
    out = _canonical(args).encode("utf-8")
    if len(out) > MAX_ARGS_BYTES:
        raise CanonicalError(f"at most {MAX_ARGS_BYTES} bytes of canonical JSON")
    return out


def _pairs(error: Type[Exception]) -> Callable[[Any], Dict[str, Any]]:
    """An object_pairs_hook that raises error on a key twice in one object."""

    def hook(pairs: Any) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                raise error(f"key {k!r} twice in one object")
            out[k] = v
        return out

    return hook


def _reject_constant(name: str) -> Any:
    raise CanonicalError(f"{name} is not a JSON number")


def parse_args(text: Union[str, bytes]) -> Dict[str, Any]:
    """Arguments as JSON text, parsed as the guard parses them: one object,
    no key twice, numbers as doubles within range, no NaN or Infinity."""
    try:
        v = json.loads(text, object_pairs_hook=_pairs(CanonicalError), parse_int=float,
                       parse_constant=_reject_constant)
    except json.JSONDecodeError as err:
        raise CanonicalError(f"not JSON: {err}") from err
    if not isinstance(v, dict):
        raise CanonicalError("the arguments are one JSON object")
    return v


def canonical_json(text: Union[str, bytes]) -> bytes:
    """The canonical JSON of arguments given as JSON text."""
    return canonical_args(parse_args(text))


def args_hash(args: Union[Mapping[str, Any], str, bytes, None]) -> str:
    """SHA-256 (lowercase hex) of the canonical JSON: a dict, or JSON text."""
    canon = canonical_json(args) if isinstance(args, (str, bytes)) else canonical_args(args)
    return hashlib.sha256(canon).hexdigest()


# ---- the token --------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    text_sha256: str
    start_ms: int
    end_ms: int
    received_ms: int


@dataclass(frozen=True)
class Claims:
    issuer: str
    #: The ALLOW's decision id: what Redeem claims once.
    decision_id: str
    call_id: str
    tool: str
    args_sha256: str
    issued_at: _dt.datetime
    expires_at: _dt.datetime
    key_id: str
    turn: Optional[Turn] = None


_B64 = re.compile(r"^[A-Za-z0-9_-]+$")
_ID = re.compile(r"^[A-Za-z0-9_-]+$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def _b64(part: str, i: int) -> bytes:
    """Strict base64url without padding: the one canonical spelling."""
    if not part or not _B64.match(part) or len(part) % 4 == 1:
        raise Malformed(f"part {i} is not base64url")
    try:
        b = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError) as err:
        raise Malformed(f"part {i} is not base64url") from err
    if base64.urlsafe_b64encode(b).rstrip(b"=").decode() != part or not b:
        raise Malformed(f"part {i} is not canonical base64url (unused bits set)")
    return b


def _object(b: bytes, what: str) -> Dict[str, Any]:
    try:
        v = json.loads(b, object_pairs_hook=_pairs(Malformed))
    except (ValueError, CanonicalError) as err:
        raise Malformed(f"{what}: {err}") from err
    if not isinstance(v, dict):
        raise Malformed(f"{what}: not a JSON object")
    return v


def _int(c: Mapping[str, Any], name: str) -> int:
    v = c.get(name)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v):
        raise Malformed(f"claim {name!r}: want a whole number")
    return int(v)


def _str(c: Mapping[str, Any], name: str, pattern: Optional["re.Pattern[str]"] = None) -> str:
    v = c.get(name)
    if not isinstance(v, str) or not v or (pattern is not None and not pattern.match(v)):
        raise Malformed(f"claim {name!r}: missing or malformed")
    return v


def _claims(c: Mapping[str, Any], kid: str) -> Claims:
    iat, exp = _int(c, "iat"), _int(c, "exp")
    if exp <= iat:
        raise Malformed("exp is not after iat")
    turn = None
    if "turn" in c:
        t = c["turn"]
        if not isinstance(t, dict):
            raise Malformed("claim 'turn': not an object")
        turn = Turn(_str(t, "text_sha256", _HEX64), _int(t, "start_ms") if "start_ms" in t else 0,
                    _int(t, "end_ms") if "end_ms" in t else 0, _int(t, "received_ms") if "received_ms" in t else 0)
    utc = _dt.timezone.utc
    return Claims(
        issuer=_str(c, "iss"),
        decision_id=_str(c, "jti", _ID),
        call_id=_str(c, "call_id"),
        tool=_str(c, "tool"),
        args_sha256=_str(c, "args_sha256", _HEX64),
        issued_at=_dt.datetime.fromtimestamp(iat, utc),
        expires_at=_dt.datetime.fromtimestamp(exp, utc),
        key_id=kid,
        turn=turn,
    )


class Verifier:
    """Verifies approvals with the guard's public keys.

    ``jwks`` is the guard's JWKS as a dict or JSON text (fetch_jwks reads
    it from the guard). ``skew`` and ``max_ttl`` are seconds; ``now`` the
    clock (seconds since the epoch).
    """

    def __init__(
        self,
        jwks: Union[Mapping[str, Any], str, bytes],
        *,
        issuer: str = DEFAULT_ISSUER,
        skew: float = 10.0,
        max_ttl: float = 600.0,
        now: Callable[[], float] = time.time,
    ) -> None:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        doc = json.loads(jwks) if isinstance(jwks, (str, bytes)) else jwks
        keys = doc.get("keys") if isinstance(doc, Mapping) else None
        if not isinstance(keys, list):
            raise ValueError("jwks: want an object with a \"keys\" list")
        self._keys: Dict[str, Any] = {}
        for k in keys:
            if not isinstance(k, Mapping) or k.get("kty") != "OKP" or k.get("crv") != "Ed25519":
                continue  # not a key this verifier uses
            kid, x = k.get("kid"), k.get("x")
            if not isinstance(kid, str) or not kid or not isinstance(x, str):
                raise ValueError("jwks: an Ed25519 key without kid or x")
            raw = _b64(x, 0)
            if len(raw) != 32:
                raise ValueError(f"jwks: key {kid!r}: x is not 32 bytes")
            self._keys[kid] = Ed25519PublicKey.from_public_bytes(raw)
        if not self._keys:
            raise ValueError("jwks: no Ed25519 key")
        self.issuer, self.skew, self.max_ttl, self._now = issuer, skew, max_ttl, now

    def verify(self, token: str) -> Claims:
        """The token's claims, once its form, signature, claims, issuer and
        expiry check; raises an ApprovalError otherwise."""
        from cryptography.exceptions import InvalidSignature

        if not isinstance(token, str):
            raise Malformed("not a string")
        if len(token) > MAX_TOKEN_BYTES:
            raise Malformed(f"longer than {MAX_TOKEN_BYTES} bytes")
        parts = token.split(".")
        if len(parts) != 3:
            raise Malformed(f"not a compact JWS ({len(parts)} parts, want 3)")
        raw = [_b64(p, i + 1) for i, p in enumerate(parts)]
        header = _object(raw[0], "header")
        if not isinstance(header.get("alg"), str):
            raise Algorithm("header has no \"alg\" string")
        if header["alg"] != "EdDSA":
            raise Algorithm(f"{header['alg']!r}, want EdDSA")
        extra = set(header) - {"alg", "kid", "typ"}
        if extra:
            raise Malformed(f"header: parameter(s) {sorted(extra)} not accepted")
        if header.get("typ") != TOKEN_TYPE:
            raise Malformed(f"header: typ {header.get('typ')!r}, want {TOKEN_TYPE!r}")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise Malformed("header: no \"kid\"")
        key = self._keys.get(kid)
        if key is None:
            raise UnknownKey(f"key id {kid!r} is not in the JWKS")
        try:
            key.verify(raw[2], (parts[0] + "." + parts[1]).encode())
        except InvalidSignature as err:
            raise BadSignature(f"key id {kid!r}") from err
        c = _claims(_object(raw[1], "claims"), kid)
        if c.issuer != self.issuer:
            raise WrongIssuer(f"issued by {c.issuer!r}, want {self.issuer!r}")
        iat, exp = c.issued_at.timestamp(), c.expires_at.timestamp()
        if exp - iat > self.max_ttl:
            raise Malformed(f"valid for {exp - iat:.0f} s, longer than the {self.max_ttl:.0f} s allowed")
        now = self._now()
        if iat - now > self.skew:
            raise Malformed("issued in the future: the guard's clock and this one differ by more than the skew")
        if now >= exp + self.skew:
            raise Expired(f"at {c.expires_at.isoformat()}")
        return c

    def verify_action(
        self,
        token: str,
        *,
        tool: str,
        args: Union[Mapping[str, Any], str, bytes, None],
        call_id: Optional[str] = None,
    ) -> Claims:
        """verify, then the action: the tool, the arguments (a dict as the
        backend will execute them, or their JSON text) and, when the
        backend knows it, the call."""
        c = self.verify(token)
        if not tool:
            raise Mismatch("no tool to compare")
        try:
            h = args_hash(args)
        except CanonicalError as err:
            raise Mismatch(f"arguments: {err}") from err
        if call_id and call_id != c.call_id:
            raise Mismatch(f"approved for call {c.call_id!r}, not {call_id!r}")
        if tool != c.tool:
            raise Mismatch(f"approved for tool {c.tool!r}, not {tool!r}")
        if h != c.args_sha256:
            raise Mismatch(f"the arguments differ from the approved ones (sha256 {h}, approved {c.args_sha256})")
        return c


def fetch_jwks(url: str, *, timeout: float = 5.0) -> Dict[str, Any]:
    """The guard's JWKS, read from url (http://<guard http addr>/.well-known/jwks.json).
    Blocking: from asyncio, run it in a thread (asyncio.to_thread)."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"jwks url {url!r}: want http:// or https://")
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (scheme checked above)
        doc: Dict[str, Any] = json.loads(resp.read())
    return doc
