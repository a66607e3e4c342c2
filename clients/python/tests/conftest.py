"""Tests of the yesguard package against a real guard built from this
repository (yesguard.testing). Async tests run on their own event loop,
without pytest-asyncio: Debian's pytest is all they need."""

from __future__ import annotations

import asyncio
import inspect
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from yesguard import testing  # noqa: E402


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: Any) -> Any:
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        asyncio.run(asyncio.wait_for(pyfuncitem.obj(**args), timeout=120))
        return True
    return None


@pytest.fixture(scope="session")
def guard() -> Iterator[testing.RunningGuard]:
    """One guard for the tests that need no flags of their own."""
    g = asyncio.run(testing.start_guard())
    yield g
    asyncio.run(g.stop())


@pytest.fixture(scope="session")
def certs() -> Dict[str, str]:
    """A CA, a server certificate for localhost/127.0.0.1 and a client
    certificate, by the TypeScript tests' own generator."""
    root = testing.repo_root()
    assert root is not None
    d = tempfile.mkdtemp(prefix="yesguard-py-certs-")
    subprocess.run(["go", "run", "./clients/typescript/test/testdata/gencerts/main.go", d], cwd=root, check=True)
    return {name: os.path.join(d, f"{name}.pem") for name in ("ca", "server", "server-key", "client", "client-key")}
