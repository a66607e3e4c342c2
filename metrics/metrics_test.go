package metrics

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCatalogueNames checks the naming rules and that each series' name and
// labels are the ones the registry exports.
func TestCatalogueNames(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Catalogue() {
		t.Run(s.Name, func(t *testing.T) {
			if seen[s.Name] {
				t.Errorf("declared twice")
			}
			seen[s.Name] = true
			if !strings.HasPrefix(s.Name, Namespace+"_") {
				t.Errorf("lacks the %s_ prefix", Namespace)
			}
			if s.Help == "" {
				t.Error("no help")
			}
			switch s.Type {
			case Counter:
				if !strings.HasSuffix(s.Name, "_total") {
					t.Error("a counter's name must end in _total")
				}
			case Histogram:
				if !strings.HasSuffix(s.Name, "_seconds") {
					t.Error("a histogram of durations must end in _seconds")
				}
			case Gauge:
				if strings.HasSuffix(s.Name, "_total") {
					t.Error("a gauge's name must not end in _total")
				}
			}
			for _, l := range s.Labels {
				if l == "call_id" || l == "decision_id" {
					t.Errorf("unbounded label %q", l)
				}
			}
		})
	}
}

// TestCollectorsExportTheCatalogue: each entry's collector, once its
// vector has a child, exports the entry's name, type and labels.
func TestCollectorsExportTheCatalogue(t *testing.T) {
	reg := prometheus.NewRegistry()
	for _, s := range Catalogue() {
		c := s.Collector()
		reg.MustRegister(c)
		labels := make([]string, len(s.Labels))
		for i := range labels {
			labels[i] = "x"
		}
		switch v := c.(type) {
		case *prometheus.CounterVec:
			v.WithLabelValues(labels...).Inc()
		case *prometheus.GaugeVec:
			v.WithLabelValues(labels...).Set(1)
		case *prometheus.HistogramVec:
			v.WithLabelValues(labels...).Observe(0.001)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, mf := range mfs {
		got[mf.GetName()] = strings.ToLower(mf.GetType().String())
		for _, metric := range mf.GetMetric() {
			var labels []string
			for _, lp := range metric.GetLabel() {
				labels = append(labels, lp.GetName())
			}
			s, _ := Lookup(mf.GetName())
			want := slices.Clone(s.Labels)
			slices.Sort(want)
			if !slices.Equal(labels, want) {
				t.Errorf("%s exported with labels %v, catalogue says %v", mf.GetName(), labels, s.Labels)
			}
		}
	}
	for _, s := range Catalogue() {
		if got[s.Name] != string(s.Type) {
			t.Errorf("%s: exported as %q, catalogue says %q", s.Name, got[s.Name], s.Type)
		}
		delete(got, s.Name)
	}
	for name := range got {
		t.Errorf("%s exported but not in the catalogue", name)
	}
}

// TestConstructorsRegister: the constructors register on the registerer
// they are given, and build unregistered collectors without one.
func TestConstructorsRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := NewGauge(reg, ActiveCalls)
	g.Set(3)
	if got := testutil.ToFloat64(g); got != 3 {
		t.Errorf("active calls = %v", got)
	}
	if n, err := testutil.GatherAndCount(reg, ActiveCalls.Name); err != nil || n != 1 {
		t.Errorf("GatherAndCount = %d, %v", n, err)
	}
	NewCounter(nil, NATSReconnects).Inc() // no registry: no panic
}

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string
		ok   bool
	}{
		{"yesguard_guard_decisions_total", "yesguard_guard_decisions_total", true},
		{"yesguard_guard_check_duration_seconds_bucket", "yesguard_guard_check_duration_seconds", true},
		{"yesguard_guard_transcript_wait_seconds_count", "yesguard_guard_transcript_wait_seconds", true},
		{"yesguard_guard_transcript_wait_seconds_sum", "yesguard_guard_transcript_wait_seconds", true},
		{"yesguard_build_info", "yesguard_build_info", true},
		// Only histograms have _bucket, _sum and _count series.
		{"yesguard_transcript_active_calls_count", "", false},
		{"yesguard_guard_decisions", "", false},
		{"yesguard_nope_total", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := Lookup(tc.name)
			if ok != tc.ok || s.Name != tc.want {
				t.Errorf("Lookup = %q, %v; want %q, %v", s.Name, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestLatencyBuckets(t *testing.T) {
	if LatencyBuckets[0] != 0.0001 || LatencyBuckets[len(LatencyBuckets)-1] != 2 {
		t.Errorf("buckets %v do not span 100µs to 2s", LatencyBuckets)
	}
	if !slices.IsSorted(LatencyBuckets) {
		t.Errorf("buckets %v not sorted", LatencyBuckets)
	}
}

// TestOperationsGuideListsEverySeries keeps docs/operations.md's table in
// step with the catalogue.
func TestOperationsGuideListsEverySeries(t *testing.T) {
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, s := range Catalogue() {
		row := fmt.Sprintf("| `%s` | %s |", s.Name, s.Type)
		if !strings.Contains(doc, row) {
			t.Errorf("docs/operations.md lacks the row of %s (%q)", s.Name, row)
		}
	}
}
