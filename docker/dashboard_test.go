package docker

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/yesguard/yesguard/metrics"
)

const (
	dashboardPath  = "grafana/dashboards/yesguard.json"
	datasourcePath = "grafana/provisioning/datasources/prometheus.yaml"
)

// dashboard is the part of Grafana's dashboard JSON the tests read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasourceRef  `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	Targets    []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource *datasourceRef `json:"datasource"`
	} `json:"targets"`
	// A collapsed row holds its panels.
	Panels []panel `json:"panels"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// query is one PromQL expression of the dashboard and where it is.
type query struct {
	where string
	expr  string
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	return d
}

// allPanels flattens rows.
func (d dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// queries lists every panel target's expr, one per target.
func (d dashboard) queries() []query {
	var out []query
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			out = append(out, query{where: p.Title + "/" + tg.RefID, expr: tg.Expr})
		}
	}
	return out
}

// variableQueries lists the template variables' queries.
func (d dashboard) variableQueries(t *testing.T) []query {
	t.Helper()
	var out []query
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			// The older form: the query as a string.
			var s string
			if err := json.Unmarshal(v.Query, &s); err != nil {
				t.Fatalf("variable %s: query %s", v.Name, v.Query)
			}
			q.Query = s
		}
		out = append(out, query{where: "variable " + v.Name, expr: q.Query})
	}
	return out
}

func (d dashboard) variables() []string {
	var out []string
	for _, v := range d.Templating.List {
		out = append(out, v.Name)
	}
	return out
}

var (
	metricNameRE = regexp.MustCompile(`\byesguard_[a-zA-Z0-9_:]+`)
	// $name or ${name}: the name is the first or the second group.
	variableRE = regexp.MustCompile(`\$(?:\{([a-zA-Z_][a-zA-Z0-9_]*)\}|([a-zA-Z_][a-zA-Z0-9_]*))`)
	// Grafana's own variables that the dashboard may use.
	grafanaVariables = []string{"__rate_interval", "__interval", "__range"}
)

// datasourceUID is the uid of the provisioned Prometheus data source.
func datasourceUID(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(datasourcePath)
	if err != nil {
		t.Fatal(err)
	}
	var prov struct {
		Datasources []struct {
			Name, UID, Type, URL string
		} `yaml:"datasources"`
	}
	if err := yaml.Unmarshal(b, &prov); err != nil {
		t.Fatalf("%s: %v", datasourcePath, err)
	}
	if len(prov.Datasources) != 1 || prov.Datasources[0].Type != "prometheus" || prov.Datasources[0].UID == "" {
		t.Fatalf("%s: want one prometheus data source with a uid, got %+v", datasourcePath, prov.Datasources)
	}
	return prov.Datasources[0].UID
}

// TestDashboardMetricNames is the dashboard's CI check: every yesguard_*
// series a query names (less _bucket, _sum and _count of histograms) is in
// the metrics catalogue, and the dashboard covers the series operators
// need.
func TestDashboardMetricNames(t *testing.T) {
	d := loadDashboard(t)
	qs := append(d.queries(), d.variableQueries(t)...)
	if len(qs) < 10 {
		t.Fatalf("only %d queries", len(qs))
	}
	used := map[string]bool{}
	for _, q := range qs {
		names := metricNameRE.FindAllString(q.expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: names no yesguard series: %s", q.where, q.expr)
		}
		for _, name := range names {
			s, ok := metrics.Lookup(name)
			if !ok {
				t.Errorf("%s: %s is not in the metrics catalogue (metrics/metrics.go)", q.where, name)
				continue
			}
			used[s.Name] = true
			if strings.HasSuffix(name, "_bucket") && !strings.Contains(q.expr, "histogram_quantile") {
				t.Errorf("%s: %s outside histogram_quantile", q.where, name)
			}
			if s.Type == metrics.Counter && !regexp.MustCompile(`(rate|increase)\(\s*`+name+`\b`).MatchString(q.expr) {
				t.Errorf("%s: counter %s not under rate() or increase()", q.where, name)
			}
		}
	}
	for _, name := range []string{
		"yesguard_guard_decisions_total", "yesguard_guard_check_duration_seconds",
		"yesguard_guard_transcript_wait_seconds", "yesguard_transcript_events_total",
		"yesguard_transcript_events_rejected_total", "yesguard_transcript_active_calls",
		"yesguard_dedupe_hits_total", "yesguard_nats_connected", "yesguard_nats_reconnects_total",
		"yesguard_decision_log_dropped_total", "yesguard_build_info",
		"yesguard_guard_redeems_total", "yesguard_guard_completions_total", "yesguard_guard_check_errors_total",
	} {
		if !used[name] {
			t.Errorf("no panel shows %s", name)
		}
	}
}

// TestMetricNameCheckCatchesUnknownNames: the check above fails on a name
// not in the catalogue (a renamed series, a typo).
func TestMetricNameCheckCatchesUnknownNames(t *testing.T) {
	for _, expr := range []string{
		`sum(rate(yesguard_guard_decision_total[5m]))`,
		`histogram_quantile(0.9, sum by (le) (rate(yesguard_guard_check_latency_seconds_bucket[5m])))`,
		`yesguard_transcript_active_calls_count`,
	} {
		unknown := false
		for _, name := range metricNameRE.FindAllString(expr, -1) {
			if _, ok := metrics.Lookup(name); !ok {
				unknown = true
			}
		}
		if !unknown {
			t.Errorf("%s passed the check", expr)
		}
	}
}

// TestDashboardShape checks what Grafana needs to load the dashboard
// against the provisioned data source.
func TestDashboardShape(t *testing.T) {
	d := loadDashboard(t)
	uid := datasourceUID(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: both are needed", d.UID, d.Title)
	}
	ids := map[int]string{}
	vars := append(d.variables(), grafanaVariables...)
	for _, p := range d.allPanels() {
		if p.ID == 0 || ids[p.ID] != "" {
			t.Errorf("panel %q: id %d missing or also %q's", p.Title, p.ID, ids[p.ID])
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || len(p.Targets) == 0 {
			t.Errorf("panel %d: title %q, %d targets", p.ID, p.Title, len(p.Targets))
		}
		if p.Datasource == nil || p.Datasource.UID != uid {
			t.Errorf("panel %q: data source %+v, want uid %q", p.Title, p.Datasource, uid)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: refId %q missing or repeated", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			if tg.Datasource != nil && tg.Datasource.UID != uid {
				t.Errorf("panel %q/%s: data source %+v, want uid %q", p.Title, tg.RefID, tg.Datasource, uid)
			}
			if !balanced(tg.Expr) {
				t.Errorf("panel %q/%s: unbalanced brackets: %s", p.Title, tg.RefID, tg.Expr)
			}
			for _, m := range variableRE.FindAllStringSubmatch(tg.Expr, -1) {
				if name := m[1] + m[2]; !slices.Contains(vars, name) {
					t.Errorf("panel %q/%s: unknown variable $%s", p.Title, tg.RefID, name)
				}
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Datasource != nil && v.Datasource.UID != uid {
			t.Errorf("variable %s: data source %+v, want uid %q", v.Name, v.Datasource, uid)
		}
	}
}

// balanced reports whether (), [] and {} nest properly outside strings.
func balanced(s string) bool {
	var stack []rune
	inString := false
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	for _, r := range s {
		switch {
		case r == '"':
			inString = !inString
		case inString:
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
		case pairs[r] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) == 0 && !inString
}
