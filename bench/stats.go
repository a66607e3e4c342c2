package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// lat is a set of latencies.
type lat []time.Duration

// pct returns the nearest-rank percentile p (0-100); 0 when empty.
func (l lat) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func us(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// frac is a/b, 0 when either is missing.
func frac(a, b float64) float64 {
	if a == 0 || b == 0 {
		return 0
	}
	return a / b
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func perSec(n float64) string {
	switch {
	case n == 0:
		return "-"
	case n >= 1e6:
		return fmt.Sprintf("%.2f M/s", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f k/s", n/1e3)
	}
	return fmt.Sprintf("%.0f /s", n)
}

func bytesStr(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.2f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

// row is one line of the table. met is "met" or "not met" for a row that
// is one of issue 15's goals, judged from the figures of this run, and
// empty for a row that only explains another.
type row struct {
	measure, guard, floor, ratio, goal, met string
}

// verdict is a goal row's met column.
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// atMost is the met column of a goal "at or under limit": not met when
// the figure is missing (0), so that a phase that measured nothing never
// passes.
func atMost(v, limit float64) string { return verdict(v > 0 && v <= limit) }

// atLeast is the met column of a goal "at or over limit".
func atLeast(v, limit float64) string { return verdict(v > 0 && v >= limit) }

// table prints the rows, aligned, with a header naming the conditions.
func printTable(w io.Writer, head []string, rows []row, notes []string) {
	for _, h := range head {
		fmt.Fprintln(w, h)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tyesguard\tfloor (wire)\tratio\tgoal\tmet")
	fmt.Fprintln(tw, "-------\t--------\t------------\t-----\t----\t---")
	for _, r := range rows {
		if r.measure == "" {
			fmt.Fprintln(tw, "\t\t\t\t\t")
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.measure, r.guard, r.floor, r.ratio, r.goal, r.met)
	}
	_ = tw.Flush()
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}

// loadAvg is /proc/loadavg's first three fields, for the record of the
// conditions ("" off Linux).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// cpuModel is the first model name of /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// memTotal is MemTotal of /proc/meminfo.
func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == "MemTotal" {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kb); err == nil {
				return fmt.Sprintf("%.1f GiB", kb/(1<<20))
			}
		}
	}
	return "?"
}
