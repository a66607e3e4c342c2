package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/yesguard/yesguard/auth"
)

// tokenEnv is where `token hash` reads the token from first, so that it
// never has to be typed on a command line.
const tokenEnv = envPrefix + "TOKEN"

// runToken makes a bearer token for the gRPC API and its token file entry
// (`token`), or the entry of a token the user already has (`token hash`,
// reading YESGUARD_TOKEN or the first line of stdin). The token is
// printed once and stored nowhere: the file holds only its hash.
func runToken(_ context.Context, args []string, e *env) int {
	fs := newFlagSet("token", e)
	name := fs.String("name", "", "the token's `name` in the file and in logs (default: its roles, e.g. pipeline)")
	roles := fs.String("roles", string(auth.RolePipeline), "comma-separated `roles`: pipeline (Check, Complete, Redeem), auditor (ListDecisions)")
	calls := fs.String("calls", "", "comma-separated call-id `prefixes` the token is bound to (e.g. tenant-a-): its Checks, reads and pages reach only those calls; empty: every call")
	asJSON := fs.Bool("json", false, "print one JSON document instead of text")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: yesguard token [flags]       make a token and its entry for --grpc-tokens\n"+
			"       yesguard token hash [flags]  print the entry of an existing token ($%s, else the first line of stdin)\n\nFlags:\n", tokenEnv)
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return usageError("token", flagError{err}, e)
	}
	hash := len(pos) == 1 && pos[0] == "hash"
	if len(pos) > 0 && !hash {
		return usageError("token", fmt.Errorf("unexpected arguments %q (want none, or hash)", pos), e)
	}
	rs, err := auth.ParseRoles(*roles)
	if err != nil {
		return usageError("token", fmt.Errorf("--roles: %w", err), e)
	}
	if *name == "" {
		parts := make([]string, len(rs))
		for i, r := range rs {
			parts[i] = string(r)
		}
		*name = strings.Join(parts, "-")
	}
	if !auth.ValidTokenName(*name) {
		return usageError("token", fmt.Errorf("--name %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", *name), e)
	}

	token := ""
	if hash {
		token, err = existingToken(e)
		if err != nil {
			fmt.Fprintf(e.stderr, "yesguard token hash: %v\n", err)
			return exitUsage
		}
	} else {
		token = auth.NewToken()
	}
	entry := auth.TokenEntry(*name, token, rs)
	var prefixes []string
	if *calls != "" {
		quoted := []string{}
		for _, c := range strings.Split(*calls, ",") {
			c = strings.TrimSpace(c)
			prefixes = append(prefixes, c)
			quoted = append(quoted, strconv.Quote(c))
		}
		entry += "    calls: [" + strings.Join(quoted, ", ") + "]\n"
		// The entry is checked as the guard will read it, so that a bad
		// prefix is refused here rather than at the guard's start.
		if _, err := auth.ParseTokens([]byte("tokens:\n"+entry), "--calls"); err != nil {
			return usageError("token", fmt.Errorf("--calls %q: %w", *calls, err), e)
		}
	}
	if *asJSON {
		doc := struct {
			Name   string      `json:"name"`
			Token  string      `json:"token,omitempty"`
			SHA256 string      `json:"sha256"`
			Roles  []auth.Role `json:"roles"`
			Calls  []string    `json:"calls,omitempty"`
			Entry  string      `json:"entry"`
		}{Name: *name, SHA256: auth.HashToken(token), Roles: rs, Calls: prefixes, Entry: entry}
		if !hash {
			doc.Token = token
		}
		if err := writeJSON(e.stdout, doc); err != nil {
			fmt.Fprintf(e.stderr, "yesguard token: %v\n", err)
			return exitError
		}
		return exitOK
	}
	if !hash {
		fmt.Fprintf(e.stdout, "# The token: give it to the client (%s, or 'authorization: Bearer <token>').\n"+
			"# It is shown only now and stored nowhere.\n%s\n", tokenEnv, token)
	}
	fmt.Fprintf(e.stdout, "# Add this entry under 'tokens:' in the --grpc-tokens file, then send the guard SIGHUP:\n%s", entry)
	return exitOK
}

// existingToken reads the token to hash from YESGUARD_TOKEN, else from the
// first line of stdin.
func existingToken(e *env) (string, error) {
	if v, ok := e.lookupEnv(tokenEnv); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v), nil
	}
	line, err := bufio.NewReader(io.LimitReader(os.Stdin, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the token from stdin: %w", err)
	}
	if line = strings.TrimSpace(line); line == "" {
		return "", fmt.Errorf("no token: set %s or give it on stdin", tokenEnv)
	}
	return line, nil
}
