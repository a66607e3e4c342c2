"""The README's Python quickstart works as printed: its code, run against
a real guard (only the address changed to the test guard's), prints what
the README says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

from yesguard.testing import RunningGuard, repo_root


def _quickstart() -> str:
    readme = (repo_root() / "README.md").read_text(encoding="utf-8")  # type: ignore[operator]
    section = readme.split("### From Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "one Python block in the README's Python quickstart"
    return blocks[0]


def _run(guard: RunningGuard, code: str) -> str:
    path = os.path.join(tempfile.mkdtemp(prefix="yesguard-quickstart-"), "quickstart.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(code.replace('"127.0.0.1:50051"', f'"{guard.grpc}"'))
    python = os.environ.get("YESGUARD_QUICKSTART_PYTHON")
    env = dict(os.environ)
    if not python:  # without the venv CI makes: this checkout's package
        python = sys.executable
        env["PYTHONPATH"] = str(repo_root() / "clients" / "python" / "src")  # type: ignore[operator]
    out = subprocess.run([python, path], capture_output=True, text=True, timeout=60, env=env, cwd=os.path.dirname(path))
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_readme_quickstart(guard: RunningGuard) -> None:
    code = _quickstart()
    assert _run(guard, code).startswith("allow confirmed - Allowed: the caller confirmed.")
    no = code.replace('"Yes, please."', '"Yes. Wait, no."')
    assert no != code
    assert _run(guard, no).startswith("refuse negated")
