package transcript

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Every reason an event is rejected for is exported at zero from the
// start, so the dashboard's query of rejected events matches before the
// first; a Reason constant added to the package and not to rejectReasons
// fails here.
func TestEventsRejectedStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	if n, err := testutil.GatherAndCount(reg, "yesguard_transcript_events_rejected_total"); err != nil || n != len(rejectReasons) {
		t.Errorf("events_rejected_total: %d series at start (%v), want %d", n, err, len(rejectReasons))
	}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range pkgs["transcript"].Files {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Reason") {
				return true
			}
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				v, _ := strconv.Unquote(lit.Value)
				if !slices.Contains(rejectReasons, v) {
					t.Errorf("%s (%q) is not in rejectReasons", vs.Names[0].Name, v)
				}
			}
			return true
		})
	}
}
