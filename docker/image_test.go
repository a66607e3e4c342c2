package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/probe"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// imageUID is the user the image runs as.
const imageUID = 65532

// image is what the Dockerfile's final stage says of how the binary runs.
type image struct {
	user        string
	env         map[string]string
	entrypoint  []string
	cmd         []string
	healthcheck []string
	binary      string
}

func loadImage(t *testing.T) image {
	t.Helper()
	im := image{env: map[string]string{}}
	envRE := regexp.MustCompile(`(\w+)=(\S+)`)
	for _, in := range finalStage(loadDockerfile(t)) {
		switch in.cmd {
		case "USER":
			im.user = in.args
		case "ENV":
			for _, m := range envRE.FindAllStringSubmatch(in.args, -1) {
				im.env[m[1]] = m[2]
			}
		case "ENTRYPOINT":
			im.entrypoint = execForm(t, in.args)
		case "CMD":
			im.cmd = execForm(t, in.args)
		case "HEALTHCHECK":
			_, form, ok := strings.Cut(in.args, "CMD ")
			if !ok {
				t.Fatalf("HEALTHCHECK %q has no CMD", in.args)
			}
			im.healthcheck = execForm(t, form)
		}
	}
	if len(im.entrypoint) == 0 || len(im.healthcheck) == 0 {
		t.Fatalf("the final stage lacks an ENTRYPOINT or a HEALTHCHECK: %+v", im)
	}
	im.binary = im.entrypoint[0]
	return im
}

// execForm parses a JSON-array (exec form) instruction argument.
func execForm(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &out); err != nil {
		t.Fatalf("%q is not the exec form (the image has no shell): %v", s, err)
	}
	return out
}

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// imageBinary builds yesguard once for the package's tests with the
// Dockerfile's -ldflags, and otherwise the flags this test binary was
// built with (-race or not, the same CGO_ENABLED), so that every package
// comes from the build cache `go test` just filled: only the link is new.
// (The image's own -trimpath and CGO_ENABLED=0 would recompile them all:
// TestDockerfileBuildLine checks that line without running it.)
func imageBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		line, _ := buildLine(t)
		m := regexp.MustCompile(`-ldflags="([^"]*)"`).FindStringSubmatch(line)
		if m == nil {
			binaryErr = fmt.Errorf("no -ldflags in %q", line)
			return
		}
		dir, err := os.MkdirTemp("", "yesguard-image-")
		if err != nil {
			binaryErr = err
			return
		}
		// Readable and runnable by the image's user.
		if err := os.Chmod(dir, 0o755); err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "yesguard")
		args := []string{"build", "-ldflags=" + m[1], "-o", binaryPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/yesguard")...)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			binaryErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

// asImageUser makes cmd run as the image's user when the test runs as
// root (CI does); otherwise it runs as the test's user, and says so.
func asImageUser(t *testing.T, cmd *exec.Cmd) {
	if os.Geteuid() != 0 {
		t.Logf("not root: running as uid %d, not the image's %d", os.Geteuid(), imageUID)
		return
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: imageUID, Gid: imageUID}}
}

// imageDir is a temporary directory the image's user can reach (a test's
// TempDir sits in a directory only its owner may enter).
func imageDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "yesguard-image-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// imageEnv is the image's ENV, each listen address on a free port of the
// same host (0: the tests share the machine), the state directory a
// temporary one the image's user owns, plus extra.
func imageEnv(t *testing.T, im image, extra map[string]string) []string {
	t.Helper()
	state := imageDir(t)
	if os.Geteuid() == 0 {
		if err := os.Chown(state, imageUID, imageUID); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"HOME=" + state, "PATH=/usr/bin:/bin"}
	for k, v := range im.env {
		switch {
		case k == "YESGUARD_DATA_DIR":
			v = state
		case strings.HasSuffix(k, "_ADDR") || strings.HasSuffix(k, "_LISTEN"):
			host, _, err := net.SplitHostPort(v)
			if err != nil {
				t.Fatalf("ENV %s=%s: %v", k, v, err)
			}
			v = net.JoinHostPort(host, "0")
		}
		env = append(env, k+"="+v)
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// TestImageRefusesToStartWithoutAPipelineCredential: the image's NATS
// listens on every interface, so the binary run the image's way (with
// tokens for gRPC), without the pipeline's credential, exits at once
// saying how to give one.
func TestImageRefusesToStartWithoutAPipelineCredential(t *testing.T) {
	im := loadImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tokFile := filepath.Join(imageDir(t), "tokens.yaml")
	if err := os.WriteFile(tokFile, []byte("tokens:\n"+auth.TokenEntry("pipe", auth.NewToken(), []auth.Role{auth.RolePipeline})), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, imageBinary(t), append(im.entrypoint[1:], im.cmd...)...)
	cmd.Env = imageEnv(t, im, map[string]string{"YESGUARD_GRPC_TOKENS": tokFile})
	asImageUser(t, cmd)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("without a credential: %v, want exit 2\n%s", err, out)
	}
	if !strings.Contains(string(out), auth.PipelinePasswordEnv) {
		t.Errorf("the refusal does not name %s:\n%s", auth.PipelinePasswordEnv, out)
	}
}

// TestImageRefusesToStartOpenToTheNetwork (red team F0b): with the NATS
// credential but no --grpc-tokens, the image's every-interface gRPC and
// HTTP listeners would let anyone read every call and free any ALLOW: the
// binary run the image's way exits at once naming both, and the way out;
// YESGUARD_INSECURE_NO_AUTH=true is the explicit way to run it open.
func TestImageRefusesToStartOpenToTheNetwork(t *testing.T) {
	im := loadImage(t)
	pwFile := filepath.Join(imageDir(t), "nats-pipeline-password")
	if err := os.WriteFile(pwFile, []byte("pipeline-password-from-a-mounted-file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, imageBinary(t), append(im.entrypoint[1:], im.cmd...)...)
	cmd.Env = imageEnv(t, im, map[string]string{"YESGUARD_NATS_PIPELINE_PASSWORD_FILE": pwFile})
	asImageUser(t, cmd)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("without tokens: %v, want exit 2\n%s", err, out)
	}
	for _, want := range []string{"grpc_addr: 0.0.0.0:0 is not a loopback address", "http_addr: 0.0.0.0:0 is not a loopback address", "--grpc-tokens", "--insecure-no-auth"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
}

// TestImageRunsAsTheImage runs the binary as the image runs it (its user,
// ENV, ENTRYPOINT and CMD; the pipeline's password from a mounted file):
// its HEALTHCHECK command passes, the version is the build line's, the
// embedded NATS takes the pipeline's transcripts on its every-interface
// listener and refuses an anonymous client, a Check is allowed on them,
// and SIGTERM stops it cleanly.
func TestImageRunsAsTheImage(t *testing.T) {
	im := loadImage(t)
	if u, _, _ := strings.Cut(im.user, ":"); u != fmt.Sprint(imageUID) {
		t.Fatalf("USER %s, want %d", im.user, imageUID)
	}
	bin := imageBinary(t)
	_, args := buildLine(t)
	if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "yesguard "+args["VERSION"]) {
		t.Errorf("version: %q, %v; want the build line's -X version %q", out, err, args["VERSION"])
	}

	secrets := imageDir(t)
	const password = "pipeline-password-from-a-mounted-file"
	pwFile := filepath.Join(secrets, "nats-pipeline-password")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	token := auth.NewToken()
	tokFile := filepath.Join(secrets, "tokens.yaml")
	if err := os.WriteFile(tokFile, []byte("tokens:\n"+auth.TokenEntry("pipe", token, []auth.Role{auth.RolePipeline})), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(im.entrypoint[1:], im.cmd...)...)
	cmd.Env = imageEnv(t, im, map[string]string{"YESGUARD_NATS_PIPELINE_PASSWORD_FILE": pwFile, "YESGUARD_GRPC_TOKENS": tokFile, "YESGUARD_DECISION_LOG": "stdout"})
	asImageUser(t, cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // the test reads what it needs; the rest is dropped
			}
		}
		exited <- cmd.Wait()
	}()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()

	var listening struct{ GRPC, NATS, HTTP string }
	var seen []string
	for listening.GRPC == "" {
		select {
		case l := <-lines:
			seen = append(seen, l)
			if strings.Contains(l, `"msg":"yesguard listening"`) {
				if err := json.Unmarshal([]byte(l), &listening); err != nil {
					t.Fatal(err)
				}
			}
		case err := <-exited:
			for len(lines) > 0 {
				seen = append(seen, <-lines)
			}
			t.Fatalf("serve exited: %v\n%s", err, strings.Join(seen, "\n"))
		case <-ctx.Done():
			t.Fatalf("no listening line:\n%s", strings.Join(seen, "\n"))
		}
	}
	_, grpcPort, _ := net.SplitHostPort(listening.GRPC)
	natsURL := listening.NATS // the loopback of the every-interface listener

	// The HEALTHCHECK command, with the image's ENV (the gRPC address
	// variable names the port this run got).
	health := exec.CommandContext(ctx, bin, im.healthcheck[1:]...)
	health.Env = append(imageEnv(t, im, nil), "YESGUARD_GRPC_ADDR="+net.JoinHostPort("0.0.0.0", grpcPort))
	asImageUser(t, health)
	var hout []byte
	for i := 0; ; i++ {
		if hout, err = health.CombinedOutput(); err == nil {
			break
		}
		if i == 200 { // 20 s: a loaded machine starts slowly
			t.Fatalf("HEALTHCHECK %v: %v\n%s", im.healthcheck, err, hout)
		}
		time.Sleep(100 * time.Millisecond)
		health = exec.CommandContext(ctx, bin, im.healthcheck[1:]...)
		health.Env = append(imageEnv(t, im, nil), "YESGUARD_GRPC_ADDR="+net.JoinHostPort("0.0.0.0", grpcPort))
		asImageUser(t, health)
	}

	if nc, err := nats.Connect(natsURL, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Error("an anonymous client connected to the image's NATS")
	}
	pipe, err := nats.Connect(natsURL, nats.UserInfo(auth.DefaultPipelineUser, password))
	if err != nil {
		t.Fatalf("the pipeline's connect: %v", err)
	}
	defer pipe.Close()
	for _, ev := range []transcript.Event{
		{CallID: "img-1", Seq: 1, Speaker: transcript.Agent, Type: transcript.TypeTranscript, Final: true, Text: "Shall I submit your appeal now?"},
		{CallID: "img-1", Seq: 2, Speaker: transcript.Caller, Type: transcript.TypeTranscript, Final: true, Text: "Yes, please."},
	} {
		if err := probe.Publish(pipe, "yesguard.transcript", ev); err != nil {
			t.Fatal(err)
		}
	}
	cc, err := grpc.NewClient(net.JoinHostPort("127.0.0.1", grpcPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	st, _ := structpb.NewStruct(map[string]any{"appeal_id": "A-17"})
	bearer := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	resp, err := yesguardv1.NewGuardClient(cc).Check(bearer, &yesguardv1.CheckRequest{CallId: "img-1", Tool: "submit_appeal", Args: st, WaitMs: 2000})
	if err != nil || resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Errorf("Check on the pipeline's transcript: %v %v %q, %v", resp.GetOutcome(), resp.GetReason(), resp.GetDetail(), err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit 30 s after SIGTERM")
	}
}
