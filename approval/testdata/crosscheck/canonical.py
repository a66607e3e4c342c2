"""The canonical JSON rule of docs/approvals.md in Python: run it on the
vectors with `python3 canonical.py ../canonical-vectors.json`.
TestCanonicalVectorsInOtherLanguages runs it where python3 is installed."""
import hashlib
import json
import math
import sys


def number(x):
    """x laid out as ECMAScript's Number::toString does."""
    x = float(x)
    if x == 0:
        return "-0" if math.copysign(1, x) < 0 else "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exp = repr(abs(x)).partition("e")
    whole, _, frac = mantissa.partition(".")
    frac = "" if frac == "0" else frac
    all_digits = whole + frac
    digits = all_digits.lstrip("0")
    # value = 0.d1...dk * 10**n
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


def canonical(v):
    if v is None or isinstance(v, bool):
        return json.dumps(v)
    if isinstance(v, float):
        return number(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    if isinstance(v, list):
        return "[" + ",".join(canonical(x) for x in v) + "]"
    # Python sorts str by code point: the rule's order.
    return "{" + ",".join(canonical(k) + ":" + canonical(v[k]) for k in sorted(v)) + "}"


def main(path):
    with open(path, encoding="utf-8") as f:
        vectors = json.load(f)["vectors"]
    failed = 0
    for t in vectors:
        # parse_int=float: every number is a double; -0 keeps its sign.
        c = canonical(json.loads(t["input"], parse_int=float))
        if c != t["canonical"] or hashlib.sha256(c.encode("utf-8")).hexdigest() != t["sha256"]:
            failed += 1
            print(f"FAIL {t['name']}: {c} want {t['canonical']}")
    print(f"{len(vectors) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
