package docker

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"go.yaml.in/yaml/v3"
)

// composeV1Env names Debian's docker-compose 1.29 binary; .ci/run installs
// the package and sets it, so the test never skips in CI.
const composeV1Env = "YESGUARD_DOCKER_COMPOSE_V1"

// TestComposeTopLevelKeys: only the top-level keys both Compose v1.29 and
// v2 accept (no `name`, which 1.29's schema rejects), so the check holds
// without either installed.
func TestComposeTopLevelKeys(t *testing.T) {
	b, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := yaml.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	for k := range top {
		switch {
		case k == "services", k == "volumes", k == "networks", k == "configs", k == "secrets", strings.HasPrefix(k, "x-"):
		default:
			t.Errorf("top-level key %q: docker-compose 1.29 rejects it (its schema allows services, volumes, networks, configs, secrets and x-*)", k)
		}
	}
}

// TestComposeV2Parses loads compose.yaml with compose-go, the loader of
// Compose v2, which validates it against the Compose Specification's
// schema and resolves it as `docker compose config` does, with no engine.
func TestComposeV2Parses(t *testing.T) {
	opts, err := cli.NewProjectOptions([]string{"compose.yaml"}, cli.WithName("yesguard"), cli.WithWorkingDirectory("."))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose v2 rejects compose.yaml: %v", err)
	}
	for _, name := range []string{"nats", "yesguard", "prometheus", "grafana"} {
		if _, err := p.GetService(name); err != nil {
			t.Errorf("compose v2: %v", err)
		}
	}
}

// TestComposeV1Parses runs Debian's docker-compose 1.29 on compose.yaml:
// `config -q` validates it against 1.29's own schema and resolves it, and
// needs no engine.
func TestComposeV1Parses(t *testing.T) {
	bin := os.Getenv(composeV1Env)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("docker-compose"); err != nil {
			t.Skipf("%s is not set and docker-compose is not on PATH: `apt-get install docker-compose` (1.29) to check compose.yaml with it; .ci/run does", composeV1Env)
		}
	}
	if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil || !strings.Contains(string(out), "1.29") {
		t.Logf("%s version: %s (%v); the check is meant for 1.29", bin, strings.TrimSpace(string(out)), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-f", "compose.yaml", "-p", "yesguard", "config", "-q")
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix:///nonexistent") // no engine, and none needed
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker-compose 1.29 rejects compose.yaml: %v\n%s", err, out)
	}
}
