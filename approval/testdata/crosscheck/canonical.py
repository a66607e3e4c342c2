"""The canonical JSON rule of docs/approvals.md in Python: the yesguard
package's own (clients/python/src/yesguard/approval.py), run on the
vectors with `python3 canonical.py ../canonical-vectors.json`.
TestCanonicalVectorsInOtherLanguages runs it where python3 is installed.
The module is loaded from its file: it needs nothing but the standard
library (the rest of the package needs grpcio)."""
import hashlib
import importlib.util
import json
import sys
from pathlib import Path

_path = Path(__file__).resolve().parents[3] / "clients" / "python" / "src" / "yesguard" / "approval.py"
_spec = importlib.util.spec_from_file_location("yesguard_approval", _path)
approval = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = approval  # its dataclasses look their module up
_spec.loader.exec_module(approval)


def main(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    failed = accepted = 0
    for t in doc["vectors"]:
        c = approval.canonical_json(t["input"]).decode("utf-8")
        if c != t["canonical"] or hashlib.sha256(c.encode("utf-8")).hexdigest() != t["sha256"]:
            failed += 1
            print(f"FAIL {t['name']}: {c} want {t['canonical']}")
    for t in doc["rejected"]:
        try:
            approval.canonical_json(t["input"])
        except approval.CanonicalError:
            continue
        accepted += 1
        print(f"FAIL {t['name']}: accepted, want refused")
    print(f"{len(doc['vectors']) - failed} passed, {failed} failed")
    print(f"{len(doc['rejected']) - accepted} of {len(doc['rejected'])} rejected inputs refused")
    return 1 if failed or accepted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
