package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/yesguard/yesguard/server"
)

func runVersion(_ context.Context, args []string, e *env) int {
	fs := newFlagSet("version", e)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "yesguard version: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	bi := server.ReadBuildInfo()
	fmt.Fprintf(e.stdout, "yesguard %s (revision %s, %s)\n", bi.Version, bi.Revision, bi.GoVersion)
	return exitOK
}
