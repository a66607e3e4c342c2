package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/yesguard/yesguard/auth"
)

func TestTokenCommand(t *testing.T) {
	r := runCmd(t, nil, "token", "--name", "pipeline-eu", "--roles", "pipeline,auditor")
	r.expect(t, exitOK, "  - name: pipeline-eu\n", "    roles: [pipeline, auditor]\n")
	var token string
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, auth.TokenPrefix) {
			token = line
		}
	}
	if token == "" {
		t.Fatalf("no token printed:\n%s", r.stdout)
	}
	// The printed entry is a valid token file that knows the token.
	entry := r.stdout[strings.Index(r.stdout, "  - name:"):]
	set, err := auth.ParseTokens([]byte("tokens:\n"+entry), "printed")
	if err != nil {
		t.Fatalf("the printed entry does not parse: %v\n%s", err, entry)
	}
	tok, ok := set.Lookup(token)
	if !ok || tok.Name != "pipeline-eu" || !tok.Has(auth.RolePipeline) || !tok.Has(auth.RoleAuditor) {
		t.Fatalf("the file does not know the printed token: %+v, %v", tok, ok)
	}

	// token hash: the entry of an existing token, read from YESGUARD_TOKEN;
	// it never prints the token.
	h := runCmd(t, map[string]string{"YESGUARD_TOKEN": token}, "token", "hash", "--json", "--roles", "auditor")
	h.expect(t, exitOK)
	var doc struct {
		Name, Token, SHA256 string
		Roles               []string
	}
	if err := json.Unmarshal([]byte(h.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SHA256 != auth.HashToken(token) || doc.Token != "" || doc.Name != "auditor" || strings.Contains(h.stdout, token) {
		t.Fatalf("token hash: %s", h.stdout)
	}

	// --calls binds the token to call-id prefixes, in an entry the guard
	// reads back so; a prefix no call id could have is refused here.
	b := runCmd(t, nil, "token", "--name", "tenant-a", "--calls", "tenant-a-, ta-")
	b.expect(t, exitOK, `    calls: ["tenant-a-", "ta-"]`+"\n")
	var bound string
	for _, line := range strings.Split(b.stdout, "\n") {
		if strings.HasPrefix(line, auth.TokenPrefix) {
			bound = line
		}
	}
	set, err = auth.ParseTokens([]byte("tokens:\n"+b.stdout[strings.Index(b.stdout, "  - name:"):]), "printed")
	if err != nil {
		t.Fatalf("the printed entry with calls does not parse: %v\n%s", err, b.stdout)
	}
	if tok, ok := set.Lookup(bound); !ok || !slices.Equal(tok.Calls, []string{"tenant-a-", "ta-"}) {
		t.Fatalf("the bound token: %+v, %v", tok, ok)
	}
	if r := runCmd(t, nil, "token", "--calls", "a.b"); r.code != exitUsage || !strings.Contains(r.stderr, "no call would match") {
		t.Errorf("--calls a.b: exit %d, %s", r.code, r.stderr)
	}

	runCmd(t, nil, "token", "--roles", "root").expect(t, exitUsage)
	runCmd(t, nil, "token", "--name", "has space").expect(t, exitUsage)
	runCmd(t, nil, "token", "extra").expect(t, exitUsage)
}
