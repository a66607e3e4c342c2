package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/yesguard/yesguard/policytest"
)

// runTest runs dialogue test files (package policytest) in process and
// prints the results as go test does: exit 0 when every test passes, 1 when
// one fails or a file or its policy does not load, 2 for bad flags.
func runTest(ctx context.Context, args []string, e *env) int {
	const name = "test"
	fs := newFlagSet(name, e)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: yesguard test [flags] [FILES]\n\n"+
			"Runs dialogue tests (YAML: turns, a tool call, the decision it must get) through the\n"+
			"engine in process, with no NATS or gRPC, under the policy each file names and the same\n"+
			"timing rules as a running guard. FILES default to *.test.yaml here. Prints failures with a\n"+
			"diff of want against got, the decision's detail and what matched; exits 1 on any failure.\n"+
			"The format: policy.example.test.yaml, and the README's \"Testing a policy\".\n\nFlags:\n")
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, "print one JSON document instead of text")
	verbose := fs.Bool("v", false, "list every test, not only the failures")
	run := fs.String("run", "", "run only the tests whose name matches this `regexp`")
	policy := fs.String("policy", "", "policy `file` to test instead of the one each file names")
	locales := fs.String("locales-dir", "", "`dir`ectory of <lang>.yaml locales instead of the one each file names")
	files, err := parseInterleaved(fs, args)
	if err != nil {
		return usageError(name, flagError{err}, e)
	}
	o := policytest.Options{Policy: *policy, LocalesDir: *locales}
	if *run != "" {
		if o.Run, err = regexp.Compile(*run); err != nil {
			return usageError(name, fmt.Errorf("--run: %w", err), e)
		}
	}
	if len(files) == 0 {
		files, _ = filepath.Glob("*.test.yaml")
		if len(files) == 0 {
			return usageError(name, fmt.Errorf("no FILES given and no *.test.yaml here"), e)
		}
	}

	var results []*policytest.Result
	var broken []policytest.FileError
	for _, path := range files {
		f, err := policytest.Load(path)
		if err == nil {
			var res *policytest.Result
			if res, err = policytest.Run(ctx, f, o); err == nil {
				results = append(results, res)
				continue
			}
		}
		broken = append(broken, policytest.FileError{File: path, Err: err})
	}
	code := exitOK
	if len(broken) > 0 {
		code = exitError
	}
	for _, r := range results {
		if r.Failed() > 0 {
			code = exitError
		}
	}
	if *asJSON {
		if err := policytest.JSON(e.stdout, results, broken); err != nil {
			fmt.Fprintf(e.stderr, "yesguard test: %v\n", err)
			return exitError
		}
		return code
	}
	for _, b := range broken {
		fmt.Fprintf(e.stdout, "FAIL\t%s [setup failed]\n    %v\n", b.File, b.Err)
	}
	policytest.Text(e.stdout, results, *verbose)
	if code != exitOK {
		fmt.Fprintln(e.stdout, "FAIL")
	}
	return code
}
