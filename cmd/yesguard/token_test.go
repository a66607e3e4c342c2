package main

import (
	"encoding/json"
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

	runCmd(t, nil, "token", "--roles", "root").expect(t, exitUsage)
	runCmd(t, nil, "token", "--name", "has space").expect(t, exitUsage)
	runCmd(t, nil, "token", "extra").expect(t, exitUsage)
}
