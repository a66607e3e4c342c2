package docker

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// composeFile is the part of the compose file the tests read.
type composeFile struct {
	Services map[string]struct {
		Image string `yaml:"image"`
		Build *struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Ports       []string          `yaml:"ports"`
		DependsOn   []string          `yaml:"depends_on"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(false)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return c
}

// flagValue finds --name=value or --name value in a command.
func flagValue(cmd []string, name string) (string, bool) {
	for i, a := range cmd {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
		if a == name && i+1 < len(cmd) {
			return cmd[i+1], true
		}
	}
	return "", false
}

func TestCompose(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"nats", "yesguard", "prometheus", "grafana"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("no service %q", name)
		}
	}

	nats := c.Services["nats"]
	if conf, _ := flagValue(nats.Command, "-c"); !strings.HasPrefix(nats.Image, "nats:2") || mountSource(t, nats.Volumes, conf) != "./nats.conf" {
		t.Errorf("nats: image %q command %q, want nats:2 with -c and the mounted ./nats.conf", nats.Image, nats.Command)
	}

	yg := c.Services["yesguard"]
	if yg.Build == nil {
		t.Fatal("yesguard: no build section")
	}
	if _, err := os.Stat(filepath.Join(yg.Build.Context, yg.Build.Dockerfile)); err != nil {
		t.Errorf("yesguard: Dockerfile: %v", err)
	}
	if _, err := os.Stat(filepath.Join(yg.Build.Context, "go.mod")); err != nil {
		t.Errorf("yesguard: build context %q is not the module root: %v", yg.Build.Context, err)
	}
	for flag, want := range map[string]string{
		"--nats-url":           "nats://nats:4222",
		"--nats-user":          "yesguard",
		"--nats-password-file": "/run/secrets/nats-guard.pw",
		"--grpc-addr":          "0.0.0.0:50051",
		"--http-addr":          "0.0.0.0:9090",
		"--grpc-tokens":        "/run/secrets/tokens.yaml", // beyond loopback the guard starts only with tokens
	} {
		if got, _ := flagValue(yg.Command, flag); got != want {
			t.Errorf("yesguard: %s = %q, want %q", flag, got, want)
		}
	}
	if !slices.Contains(yg.DependsOn, "nats") {
		t.Error("yesguard does not depend on nats")
	}

	// Every file or directory mounted from the repository exists.
	for name, svc := range c.Services {
		for _, v := range svc.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, ".") && !strings.HasPrefix(src, "/") {
				if _, ok := c.Volumes[src]; !ok {
					t.Errorf("%s: named volume %q not declared", name, src)
				}
				continue
			}
			if secret, ok := strings.CutPrefix(src, "./secrets/"); ok {
				// Made by secrets.sh, not committed: TestComposeNATSAuth.
				if !slices.Contains(composeSecrets, secret) {
					t.Errorf("%s: mounts %s, which secrets.sh does not make", name, src)
				}
				continue
			}
			if _, err := os.Stat(src); err != nil {
				t.Errorf("%s: mounts %s: %v", name, src, err)
			}
		}
	}
	// The guard signs with the key secrets.sh made, mounted, and its data
	// directory is a named volume: a re-created container keeps its key
	// and its spool.
	if key, _ := flagValue(yg.Command, "--approval-key-file"); key == "" || mountSource(t, yg.Volumes, key) != "./secrets/approval-key.pem" {
		t.Errorf("yesguard: --approval-key-file %q is not secrets.sh's approval-key.pem", key)
	}
	dataDir, ok := flagValue(yg.Command, "--data-dir")
	if !ok {
		dataDir = "/var/lib/yesguard" // the image's YESGUARD_DATA_DIR
	}
	if !slices.ContainsFunc(yg.Volumes, func(v string) bool {
		src, dst, _ := strings.Cut(v, ":")
		_, named := c.Volumes[src]
		return named && strings.TrimSuffix(dst, ":rw") == dataDir
	}) {
		t.Errorf("yesguard: its data directory %s is not a named volume (volumes %q)", dataDir, yg.Volumes)
	}

	// The policy yesguard is started with is the one mounted.
	policy, _ := flagValue(yg.Command, "--policy")
	if policy != "" && !slices.ContainsFunc(yg.Volumes, func(v string) bool { return strings.Contains(v, ":"+policy) }) {
		t.Errorf("yesguard: --policy %s is not mounted", policy)
	}

	// Prometheus scrapes yesguard's HTTP port by its service name.
	prom := c.Services["prometheus"]
	promConfig := mountSource(t, prom.Volumes, "/etc/prometheus/prometheus.yml")
	targets := scrapeTargets(t, promConfig)
	if !slices.Contains(targets, "yesguard:9090") {
		t.Errorf("%s scrapes %v, want yesguard:9090", promConfig, targets)
	}

	// Grafana gets the provisioning and the dashboards, where the provider
	// looks for them.
	gf := c.Services["grafana"]
	prov := mountSource(t, gf.Volumes, "/etc/grafana/provisioning")
	for _, sub := range []string{"datasources", "dashboards"} {
		if _, err := os.Stat(filepath.Join(prov, sub)); err != nil {
			t.Errorf("grafana provisioning: %v", err)
		}
	}
	providerPath := dashboardProviderPath(t, filepath.Join(prov, "dashboards", "yesguard.yaml"))
	dashDir := mountSource(t, gf.Volumes, providerPath)
	if _, err := os.Stat(filepath.Join(dashDir, filepath.Base(dashboardPath))); err != nil {
		t.Errorf("grafana: dashboard not in the mounted folder: %v", err)
	}
	if home := gf.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != "" && !strings.HasPrefix(home, providerPath+"/") {
		t.Errorf("grafana: home dashboard %s is outside %s", home, providerPath)
	}
}

// mountSource is the host path of the volume mounted on target.
func mountSource(t *testing.T, volumes []string, target string) string {
	t.Helper()
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == target {
			return parts[0]
		}
	}
	t.Fatalf("nothing mounted on %s in %q", target, volumes)
	return ""
}

func scrapeTargets(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []string
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			out = append(out, st.Targets...)
		}
	}
	return out
}

func dashboardProviderPath(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var prov struct {
		Providers []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	if err := yaml.Unmarshal(b, &prov); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(prov.Providers) != 1 || prov.Providers[0].Type != "file" || prov.Providers[0].Options.Path == "" {
		t.Fatalf("%s: want one file provider with a path, got %+v", path, prov.Providers)
	}
	return prov.Providers[0].Options.Path
}

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd, args string
}

func loadDockerfile(t *testing.T) []instruction {
	t.Helper()
	f, err := os.Open("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []instruction
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// finalStage is the instructions after the last FROM.
func finalStage(ins []instruction) []instruction {
	last := 0
	for i, in := range ins {
		if in.cmd == "FROM" {
			last = i
		}
	}
	return ins[last:]
}

func TestDockerfile(t *testing.T) {
	ins := loadDockerfile(t)
	if len(ins) == 0 || ins[0].cmd != "FROM" || !strings.HasPrefix(ins[0].args, "golang:") {
		t.Fatalf("first stage %+v, want FROM golang:...", ins[:1])
	}
	final := finalStage(ins)
	base := final[0].args
	if !strings.Contains(base, "distroless/static") && base != "scratch" {
		t.Errorf("final stage FROM %s, want distroless static or scratch", base)
	}
	var user, healthcheck, entrypoint, binary string
	for _, in := range final {
		switch in.cmd {
		case "USER":
			user = in.args
		case "HEALTHCHECK":
			healthcheck = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "COPY":
			if f := strings.Fields(in.args); strings.Contains(in.args, "--from=") && strings.HasSuffix(f[len(f)-1], "/yesguard") && binary == "" {
				binary = f[len(f)-1]
			}
		}
	}
	if u, _, _ := strings.Cut(user, ":"); u != "65532" && u != "nonroot" {
		t.Errorf("USER %q, want nonroot (65532)", user)
	}
	if binary == "" {
		t.Fatal("the final stage copies no binary from the build stage")
	}
	if !strings.Contains(healthcheck, `CMD ["`+binary+`", "healthcheck"`) {
		t.Errorf("HEALTHCHECK %q, want CMD [%q, \"healthcheck\"] (exec form: the image has no shell)", healthcheck, binary)
	}
	if !strings.Contains(entrypoint, `"`+binary+`"`) {
		t.Errorf("ENTRYPOINT %q does not run %s", entrypoint, binary)
	}
	// The listen addresses the healthcheck dials come from the same
	// variables serve reads; they match compose's flags.
	env := ""
	for _, in := range final {
		if in.cmd == "ENV" {
			env += " " + in.args
		}
	}
	for _, want := range []string{"YESGUARD_GRPC_ADDR=0.0.0.0:50051", "YESGUARD_HTTP_ADDR=0.0.0.0:9090", "YESGUARD_NATS_LISTEN=0.0.0.0:4222"} {
		if !strings.Contains(env, want) {
			t.Errorf("ENV lacks %s", want)
		}
	}
	// The standalone image takes transcripts: NATS's port is exposed
	// beside gRPC's and HTTP's.
	var exposed []string
	for _, in := range final {
		if in.cmd == "EXPOSE" {
			exposed = append(exposed, strings.Fields(in.args)...)
		}
	}
	for _, port := range []string{"50051", "9090", "4222"} {
		if !slices.Contains(exposed, port) {
			t.Errorf("EXPOSE %v lacks %s", exposed, port)
		}
	}
}

// buildLine is the Dockerfile's `go build` RUN line with its ARG defaults
// substituted, and the build stage's ARGs.
func buildLine(t *testing.T) (line string, args map[string]string) {
	t.Helper()
	args = map[string]string{}
	var build string
	for _, in := range loadDockerfile(t) {
		switch {
		case in.cmd == "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			args[k] = v
		case in.cmd == "RUN" && strings.Contains(in.args, "go build"):
			build = in.args
		}
	}
	if build == "" {
		t.Fatal("no RUN with go build")
	}
	return os.Expand(build, func(k string) string { return args[k] }), args
}

// TestDockerfileBuildLine checks the Dockerfile's own `go build` line
// without compiling anything: the go command accepts it as written (its
// ARG defaults substituted, -n: the plan only), its link step carries the
// version ldflag, the -X names a variable that exists, and with its
// CGO_ENABLED=0 every package of the binary is pure Go (so the binary is
// static). That the binary built with those ldflags runs, and says its
// version, is TestImageRunsAsTheImage's. (It used to build the image's
// binary for real: on a fresh cache, -trimpath and CGO_ENABLED=0 rebuilt
// every package, 170 of the 227 s of `go test ./...`.)
func TestDockerfileBuildLine(t *testing.T) {
	line, args := buildLine(t)
	if !strings.Contains(line, "CGO_ENABLED=0") {
		t.Errorf("build line %q: want CGO_ENABLED=0 for a static binary", line)
	}
	if strings.Contains(line, "linkmode") || strings.Contains(line, "extldflags") {
		t.Errorf("build line %q: external linking makes a dynamic binary", line)
	}
	outRE := regexp.MustCompile(`-o\s+\S+`)
	if !outRE.MatchString(line) {
		t.Fatalf("build line %q has no -o", line)
	}
	out := filepath.Join(t.TempDir(), "yesguard")
	dry := strings.Replace(outRE.ReplaceAllString(line, "-o "+out), "go build", "go build -n", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", dry)
	cmd.Dir = ".." // the build context: the module root, as WORKDIR after COPY . .
	plan, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", dry, err, plan)
	}
	x := "-X github.com/yesguard/yesguard/server.version=" + args["VERSION"]
	if !strings.Contains(string(plan), x) {
		t.Errorf("the plan's link step lacks %q", x)
	}
	// -X on a name that is not a string variable is silently ignored.
	src, err := os.ReadFile("../server/buildinfo.go")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^var version string$`).Match(src) {
		t.Error("server/buildinfo.go has no `var version string` for the -X ldflag to set")
	}
	// Pure Go under CGO_ENABLED=0: no package needs cgo, and none fails.
	list := exec.CommandContext(ctx, "go", "list", "-e", "-deps", "-f", "{{.ImportPath}} {{len .CgoFiles}} {{.Error}}", "./cmd/yesguard")
	list.Dir = ".."
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) < 3 || f[1] != "0" || f[2] != "<nil>" {
			t.Errorf("under CGO_ENABLED=0: %s", l)
		}
	}
}
