"""A real guard for tests, yours and this package's.

start_guard() runs the yesguard binary as .ci/run does (free loopback ports
for gRPC, HTTP and the embedded NATS server, its own data directory) and
reads the addresses from its "yesguard listening" log line. The binary is
the ``binary`` argument, else $YESGUARD_BIN, else (inside the yesguard
repository) one built with ``go build ./cmd/yesguard``.

Waiting is for states, never for time: wait_for polls a condition (the
guard's own metrics, say) with a wide bound for a loaded machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, TypeVar, Union

from ._client import Guard

T = TypeVar("T")

_built: Optional[str] = None


def repo_root() -> Optional[Path]:
    """The yesguard repository this file sits in, if any."""
    for d in Path(__file__).resolve().parents:
        mod = d / "go.mod"
        if mod.is_file() and re.search(r"^module github\.com/yesguard/yesguard\s*$", mod.read_text(), re.M):
            return d
    return None


def guard_binary() -> str:
    """$YESGUARD_BIN, or a guard built from the repository now (once per process)."""
    global _built
    if os.environ.get("YESGUARD_BIN"):
        return os.environ["YESGUARD_BIN"]
    if _built is None:
        root = repo_root()
        if root is None:
            raise RuntimeError("no yesguard binary: pass start_guard(binary=...) or set YESGUARD_BIN")
        out = os.path.join(tempfile.mkdtemp(prefix="yesguard-py-bin-"), "yesguard")
        subprocess.run(["go", "build", "-o", out, "./cmd/yesguard"], cwd=root, check=True)
        _built = out
    return _built


async def wait_for(cond: Callable[[], Union[bool, Awaitable[bool]]], what: str, timeout: float = 20.0) -> None:
    """Polls cond every 10 ms until it holds; raises after timeout seconds naming what was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if asyncio.iscoroutine(got) or isinstance(got, asyncio.Future):
            got = await got
        if got:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.01)


class RunningGuard:
    """A guard process and what the tests read of it."""

    def __init__(self, proc: subprocess.Popen, listening: Dict[str, Any], workdir: str, args: List[str],
                 log: List[str], reader: threading.Thread) -> None:
        self.proc = proc
        self.grpc: str = listening["grpc"]
        self.nats: str = listening["nats"]
        self.http: str = listening["http"]
        self.workdir = workdir
        self.decision_log = os.path.join(workdir, "decisions.log")
        self.args = args
        self.log = log
        self._reader = reader
        self._clients: List[Guard] = []
        self._calls = 0

    def call_id(self, name: str) -> str:
        """A fresh call id, unique in this guard's life."""
        self._calls += 1
        return f"py-{name}-{os.getpid()}-{int(time.time() * 1000)}-{self._calls}"

    def client(self, **kw: Any) -> Guard:
        """A client of this guard, closed by stop()."""
        g = Guard(self.grpc, **kw)
        self._clients.append(g)
        return g

    def http_get(self, path: str) -> bytes:
        with urllib.request.urlopen(f"http://{self.http}{path}", timeout=10) as resp:
            data: bytes = resp.read()
            return data

    def jwks(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = json.loads(self.http_get("/.well-known/jwks.json"))
        return doc

    def metric(self, name: str, labels: Optional[Dict[str, str]] = None) -> float:
        """The sum of a metric's series whose labels include ``labels``."""
        text = self.http_get("/metrics").decode()
        total = 0.0
        for line in text.splitlines():
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", line)
            if not m or m.group(1) != name:
                continue
            got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            if all(got.get(k) == v for k, v in (labels or {}).items()):
                total += float(m.group(3))
        return total

    def events_seen(self) -> float:
        """Transcript events the guard has applied or rejected."""
        return self.metric("yesguard_transcript_events_total") + self.metric("yesguard_transcript_events_rejected_total")

    async def wait_events(self, n: float) -> None:
        await wait_for(lambda: self.events_seen() >= n, f"the guard to take in {n} transcript events")

    async def race(self, *, call: Callable[[], Awaitable[T]], answer: Callable[[], Awaitable[Any]]) -> T:
        """The race of a real pipeline, made certain: starts ``call`` (a
        Check, or a guarded tool), waits until the guard holds that Check
        (its in-flight gauge; or until the call ends, if it does first),
        then runs ``answer``: the caller's words land after the Check
        that they answer."""
        in_flight = self.metric("yesguard_guard_checks_in_flight")
        task = asyncio.ensure_future(call())
        await wait_for(lambda: task.done() or self.metric("yesguard_guard_checks_in_flight") > in_flight,
                       "the Check to be in flight")
        await answer()
        return await task

    def decision_records(self) -> List[Dict[str, Any]]:
        if not os.path.exists(self.decision_log):
            return []
        with open(self.decision_log, encoding="utf-8") as f:
            return [json.loads(line)["decision"] for line in f if line.strip()]

    async def close_clients(self) -> None:
        for c in self._clients:
            await c.close()
        self._clients.clear()

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM, and the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)
        return self.proc.returncode

    async def stop(self, *, keep_data: bool = False) -> None:
        await self.close_clients()
        self.terminate()
        if not keep_data:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _spawn(binary: str, args: List[str]) -> "tuple[subprocess.Popen, Dict[str, Any], List[str], threading.Thread]":
    proc = subprocess.Popen([binary, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    log: List[str] = []
    found: Dict[str, Any] = {}
    ready = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line.rstrip("\n"))
            if not ready.is_set() and '"msg":"yesguard listening"' in line:
                found.update(json.loads(line))
                ready.set()
        ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not ready.wait(60) or not found:
        proc.kill()
        proc.wait()
        raise RuntimeError("the guard did not say where it listens:\n" + "\n".join(log[-40:]))
    return proc, found, log, reader


async def start_guard(
    *,
    binary: Optional[str] = None,
    policy: Optional[str] = None,
    args: Sequence[str] = (),
    workdir: Optional[str] = None,
    grpc_addr: str = "127.0.0.1:0",
    warmup: Optional[Dict[str, Any]] = None,
) -> RunningGuard:
    """Starts a guard and returns once its Guard service is SERVING.
    ``workdir`` (default: a new temporary directory) holds its data
    directory and decision log: start a guard again on the same one, and
    the same ``grpc_addr``, to restart it. ``warmup`` are the options of
    the client that waits for it (its TLS and token, say)."""
    workdir = workdir or tempfile.mkdtemp(prefix="yesguard-py-")
    full = ["serve", f"--grpc-addr={grpc_addr}", "--http-addr=127.0.0.1:0", "--nats-listen=127.0.0.1:0",
            f"--decision-log={os.path.join(workdir, 'decisions.log')}", f"--data-dir={os.path.join(workdir, 'data')}"]
    if policy is not None:
        path = os.path.join(workdir, "policy.yaml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(policy)
        full.append(f"--policy={path}")
    full.extend(args)
    proc, listening, log, reader = await asyncio.get_running_loop().run_in_executor(None, _spawn, binary or guard_binary(), full)
    g = RunningGuard(proc, listening, workdir, full, log, reader)
    try:
        await g.client(**(warmup or {})).warmup(timeout=30.0)
    except BaseException:
        await g.stop()
        raise
    return g


async def restart_guard(g: RunningGuard, *, binary: Optional[str] = None) -> RunningGuard:
    """Stops g (SIGTERM) and starts it again on its data directory and its
    gRPC address, as a redeploy does; clients made of g reconnect by
    themselves."""
    g.terminate()
    args = [a if not a.startswith("--grpc-addr=") else f"--grpc-addr={g.grpc}" for a in g.args]
    proc, listening, log, reader = await asyncio.get_running_loop().run_in_executor(None, _spawn, binary or guard_binary(), args)
    n = RunningGuard(proc, listening, g.workdir, args, log, reader)
    n._clients = g._clients
    w = Guard(n.grpc)
    try:
        await w.warmup(timeout=30.0)
    finally:
        await w.close()
    return n
