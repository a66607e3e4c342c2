// Package docs holds the tests of the guides' code: the Python snippets
// of integrations.md run against stand-ins of the libraries they import
// (nats-py, grpcio, protobuf, the generated stubs, Pipecat), so that what
// a reader copies does what the guide says.
package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pythonEnv names the python3 binary; set, the snippet tests never skip
// (.ci/run sets it).
const pythonEnv = "YESGUARD_PYTHON"

// pythonBlock returns the first ```python block after the heading.
func pythonBlock(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("integrations.md has no heading %q", heading)
	}
	rest := doc[i:]
	start := strings.Index(rest, "```python\n")
	if start < 0 {
		t.Fatalf("no python block after %q", heading)
	}
	rest = rest[start+len("```python\n"):]
	end := strings.Index(rest, "\n```")
	if end < 0 {
		t.Fatalf("the python block after %q does not end", heading)
	}
	return rest[:end+1]
}

// stubs are the modules the snippets import, doing just what the driver
// checks: the NATS connection records plain and JetStream publishes, the
// gRPC stub answers what the driver sets.
var stubs = map[string]string{
	"nats/__init__.py": `
class Conn:
    def __init__(self):
        self.plain, self.acked = [], []
    async def publish(self, subject, payload=b"", reply="", headers=None):
        self.plain.append((subject, payload, headers))
    def jetstream(self, **kw):
        conn = self
        class JS:
            async def publish(self, subject, payload=b"", timeout=None, stream=None, headers=None):
                conn.acked.append((subject, payload, headers))
                return object()
        return JS()
async def connect(*a, **kw):
    return Conn()
`,
	"grpc/__init__.py": "from . import aio\n",
	"grpc/aio/__init__.py": `
class AioRpcError(Exception):
    pass
def insecure_channel(addr):
    return None
`,
	"google/__init__.py":          "",
	"google/protobuf/__init__.py": "",
	"google/protobuf/struct_pb2.py": `
class Struct(dict):
    pass
`,
	"google/protobuf/json_format.py": `
def MessageToDict(m):
    return dict(m)
`,
	"yesguard/__init__.py":    "",
	"yesguard/v1/__init__.py": "",
	"yesguard/v1/guard_pb2.py": `
OUTCOME_ALLOW, OUTCOME_REFUSE, OUTCOME_DUPLICATE = 1, 2, 3
class _Msg:
    def __init__(self, **kw):
        self.__dict__.update(kw)
    def HasField(self, name):
        return getattr(self, name, None) is not None
CheckRequest = CompleteRequest = CheckResponse = _Msg
`,
	"yesguard/v1/guard_pb2_grpc.py": `
class GuardStub:
    def __init__(self, channel):
        self.answer, self.completed = None, []
    async def Check(self, req, timeout=None):
        return self.answer
    async def Complete(self, req, timeout=None):
        self.completed.append(req)
`,
	"pipecat/__init__.py":            "",
	"pipecat/frames/__init__.py":     "",
	"pipecat/processors/__init__.py": "",
	"pipecat/services/__init__.py":   "",
	"pipecat/frames/frames.py": `
class Frame: pass
class BotStartedSpeakingFrame(Frame): pass
class BotStoppedSpeakingFrame(Frame): pass
class CancelFrame(Frame): pass
class EndFrame(Frame): pass
class InterimTranscriptionFrame(Frame): pass
class InterruptionFrame(Frame): pass
class TranscriptionFrame(Frame): pass
class TTSTextFrame(Frame): pass
class UserStartedSpeakingFrame(Frame): pass
class UserStoppedSpeakingFrame(Frame): pass
`,
	"pipecat/processors/frame_processor.py": `
import enum
class FrameDirection(enum.Enum):
    DOWNSTREAM = 1
    UPSTREAM = 2
class FrameProcessor:
    def __init__(self, **kw): pass
    async def process_frame(self, frame, direction): pass
    async def push_frame(self, frame, direction=FrameDirection.DOWNSTREAM): pass
`,
	"pipecat/services/llm_service.py": `
class FunctionCallParams:
    def __init__(self, function_name, tool_call_id, arguments, result_callback):
        self.function_name, self.tool_call_id, self.arguments, self.result_callback = function_name, tool_call_id, arguments, result_callback
`,
}

// driver runs the helper and the Pipecat handler: events go out with
// JetStream's ack, never a plain publish; the model gets the tool's
// result on ALLOW and the guard's message on REFUSE, never the pair.
const driver = `
import asyncio, json
import nats
from yesguard.v1 import guard_pb2
from helper import Yesguard
from pipecat_snippet import guarded

async def main():
    nc = await nats.connect()
    yg = Yesguard(nc, None, "doc-1", "stt")
    await yg.publish(speaker="caller", type="transcript", text="Yes.", final=True)
    assert nc.plain == [], "the helper publishes without JetStream's ack: %r" % nc.plain
    assert len(nc.acked) == 1, nc.acked
    subject, payload, headers = nc.acked[0]
    body = json.loads(payload)
    assert subject == "yesguard.transcript.doc-1" and body["seq"] == 1 and body["text"] == "Yes.", (subject, body)
    assert headers and headers.get("Nats-Msg-Id", "").startswith("doc-1.stt."), headers

    async def run(args):
        return {"status": "submitted", "appeal_id": args["appeal_id"]}
    got = []
    async def result_callback(result, **kw):
        got.append(result)
    handler = guarded(yg, run)
    from pipecat.services.llm_service import FunctionCallParams
    params = FunctionCallParams("submit_appeal", "tc-1", {"appeal_id": "A-17"}, result_callback)

    yg.stub.answer = guard_pb2.CheckResponse(outcome=guard_pb2.OUTCOME_ALLOW, decision_id="d-1", message="Allowed.")
    await handler(params)
    assert got == [{"status": "submitted", "appeal_id": "A-17"}], "result_callback on ALLOW got %r" % got
    assert len(yg.stub.completed) == 1

    got.clear()
    yg.stub.answer = guard_pb2.CheckResponse(outcome=guard_pb2.OUTCOME_REFUSE, decision_id="d-2", message="Refused: ask again.")
    await handler(params)
    assert got == ["Refused: ask again."], "result_callback on REFUSE got %r" % got
    print("snippets ok")

asyncio.run(main())
`

func TestIntegrationsPythonSnippets(t *testing.T) {
	python := os.Getenv(pythonEnv)
	if python == "" {
		var err error
		if python, err = exec.LookPath("python3"); err != nil {
			t.Skipf("no python3: set %s or install python3; .ci/run does", pythonEnv)
		}
	}
	raw, err := os.ReadFile("integrations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	dir := t.TempDir()
	files := map[string]string{
		"helper.py":          pythonBlock(t, doc, "## The Python helper the snippets use"),
		"pipecat_snippet.py": pythonBlock(t, doc, "## Pipecat (Python)"),
		"driver.py":          driver,
	}
	for name, body := range stubs {
		files[name] = body
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(python, "driver.py")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "snippets ok") {
		t.Fatalf("the snippets of integrations.md: %v\n%s", err, out)
	}
}

// The README's table of common stacks names Pipecat's frames as Pipecat
// has them now: StartInterruptionFrame was removed in Pipecat 1.0.
func TestReadmeNamesCurrentPipecatFrames(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "| agent `interrupted: true` |") && !strings.Contains(strings.Split(line, "|")[2], "`InterruptionFrame`") {
			t.Errorf("the README maps Pipecat's interruptions to something else than InterruptionFrame: %s", line)
		}
	}
}
