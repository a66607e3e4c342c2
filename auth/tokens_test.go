package auth

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tokenFile writes a token file of entries (name, token, roles) and
// returns its path.
func tokenFile(t *testing.T, dir string, entries ...testToken) string {
	t.Helper()
	path := filepath.Join(dir, "tokens.yaml")
	writeFile(t, path, []byte(tokenYAML(entries...)))
	return path
}

type testToken struct {
	name, token string
	roles       []Role
}

func tokenYAML(entries ...testToken) string {
	var b strings.Builder
	b.WriteString("# test tokens\ntokens:\n")
	for _, e := range entries {
		b.WriteString(TokenEntry(e.name, e.token, e.roles))
	}
	return b.String()
}

func TestHashTokenIsSHA256Hex(t *testing.T) {
	// The SHA-256 of "abc" (FIPS 180-2, appendix B.1).
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := HashToken("abc"); got != want {
		t.Fatalf("HashToken(abc) = %s, want %s", got, want)
	}
}

func TestNewTokenIsRandomAndPrefixed(t *testing.T) {
	a, b := NewToken(), NewToken()
	if a == b {
		t.Fatal("two tokens are equal")
	}
	for _, tok := range []string{a, b} {
		if !strings.HasPrefix(tok, TokenPrefix) || len(tok) != len(TokenPrefix)+43 {
			t.Fatalf("token %q: want %s and 43 base64url characters (32 bytes)", tok, TokenPrefix)
		}
	}
}

func TestParseTokensAndLookup(t *testing.T) {
	pipe, audit, both := NewToken(), NewToken(), NewToken()
	set, err := ParseTokens([]byte(tokenYAML(
		testToken{"pipeline-eu", pipe, []Role{RolePipeline}},
		testToken{"audit", audit, []Role{RoleAuditor}},
		testToken{"ops.both", both, []Role{RolePipeline, RoleAuditor}},
	)), "tokens.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Names(); !slices.Equal(got, []string{"pipeline-eu", "audit", "ops.both"}) {
		t.Fatalf("names %v", got)
	}
	for _, tc := range []struct {
		token string
		name  string
		has   []Role
		not   []Role
	}{
		{pipe, "pipeline-eu", []Role{RolePipeline}, []Role{RoleAuditor}},
		{audit, "audit", []Role{RoleAuditor}, []Role{RolePipeline}},
		{both, "ops.both", []Role{RolePipeline, RoleAuditor}, nil},
	} {
		tok, ok := set.Lookup(tc.token)
		if !ok || tok.Name != tc.name {
			t.Fatalf("Lookup(%s) = %v, %v; want %s", tc.name, tok.Name, ok, tc.name)
		}
		for _, r := range tc.has {
			if !tok.Has(r) {
				t.Errorf("%s lacks %s", tc.name, r)
			}
		}
		for _, r := range tc.not {
			if tok.Has(r) {
				t.Errorf("%s has %s", tc.name, r)
			}
		}
	}
	for _, unknown := range []string{"", NewToken(), HashToken(pipe), pipe + "x", strings.TrimPrefix(pipe, TokenPrefix)} {
		if tok, ok := set.Lookup(unknown); ok {
			t.Errorf("Lookup(%q) found %s", unknown, tok.Name)
		}
	}
}

func TestParseTokensErrorsNameLineAndField(t *testing.T) {
	good := HashToken("x")
	for _, tc := range []struct {
		name string
		yaml string
		want []string // each must appear in the error
	}{
		{"empty file", "", []string{"tokens.yaml: empty"}},
		{"not a mapping", "- a\n", []string{"tokens.yaml:1: want a mapping"}},
		{"no tokens key", "other: 1\n", []string{"tokens.yaml:1: other: unknown key", "tokens: missing"}},
		{"empty list", "tokens: []\n", []string{"tokens.yaml:1: tokens: empty"}},
		{"not a list", "tokens: {a: b}\n", []string{"tokens.yaml:1: tokens: want a list"}},
		{"missing fields", "tokens:\n  - name: a\n", []string{"tokens.yaml:2: tokens[0].sha256: missing", "tokens.yaml:2: tokens[0].roles: missing"}},
		{"bad name", "tokens:\n  - name: 'has space'\n    sha256: " + good + "\n    roles: [pipeline]\n",
			[]string{"tokens.yaml:2: tokens[0].name: \"has space\""}},
		{"bad hash", "tokens:\n  - name: a\n    sha256: abc\n    roles: [pipeline]\n",
			[]string{"tokens.yaml:3: tokens[0].sha256: want the 64 hex digits"}},
		{"a token instead of its hash", "tokens:\n  - name: a\n    sha256: yg_secretvalue\n    roles: [pipeline]\n",
			[]string{"tokens.yaml:3: tokens[0].sha256: this is a token, not its hash"}},
		{"unknown role", "tokens:\n  - name: a\n    sha256: " + good + "\n    roles: [pipeline, admin]\n",
			[]string{"tokens.yaml:4: tokens[0].roles[1]: \"admin\" is not a role; want pipeline, auditor"}},
		{"roles not a list", "tokens:\n  - name: a\n    sha256: " + good + "\n    roles: pipeline\n",
			[]string{"tokens.yaml:4: tokens[0].roles: want a list"}},
		{"no roles", "tokens:\n  - name: a\n    sha256: " + good + "\n    roles: []\n",
			[]string{"tokens.yaml:4: tokens[0].roles: want a list of one or more"}},
		{"unknown key", "tokens:\n  - name: a\n    sha256: " + good + "\n    roles: [auditor]\n    token: x\n",
			[]string{"tokens.yaml:5: tokens[0].token: unknown key"}},
		{"duplicate name and hash", "tokens:\n  - name: a\n    sha256: " + good + "\n    roles: [auditor]\n  - name: a\n    sha256: " + good + "\n    roles: [pipeline]\n",
			[]string{"tokens.yaml:5: tokens[1].name: \"a\" is also the name at line 2", "tokens.yaml:5: tokens[1].sha256: the same hash as the entry at line 2"}},
		{"bad YAML", "tokens: [\n", []string{"tokens.yaml: yaml:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTokens([]byte(tc.yaml), "tokens.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secretvalue") {
				t.Errorf("error %q echoes the token", err)
			}
		})
	}
}

func TestReloadSwapsOrKeepsTheOldSet(t *testing.T) {
	dir := t.TempDir()
	a, b := NewToken(), NewToken()
	path := tokenFile(t, dir, testToken{"a", a, []Role{RolePipeline}})
	toks, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := toks.Lookup(b); ok {
		t.Fatal("b known before it was added")
	}
	tokenFile(t, dir, testToken{"b", b, []Role{RoleAuditor}})
	if err := toks.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := toks.Lookup(a); ok {
		t.Fatal("a still known after it was removed")
	}
	if tok, ok := toks.Lookup(b); !ok || !tok.Has(RoleAuditor) {
		t.Fatal("b not known after reload")
	}
	writeFile(t, path, []byte("tokens:\n  - name: broken\n"))
	if err := toks.Reload(); err == nil || !strings.Contains(err.Error(), "tokens[0].sha256: missing") {
		t.Fatalf("Reload of a bad file: %v", err)
	}
	if _, ok := toks.Lookup(b); !ok {
		t.Fatal("a failed reload dropped the old set")
	}
	if _, err := LoadTokens(filepath.Join(dir, "absent.yaml")); err == nil {
		t.Fatal("LoadTokens of a missing file: no error")
	}
}

func TestParseRoles(t *testing.T) {
	got, err := ParseRoles("pipeline, auditor,pipeline")
	if err != nil || !slices.Equal(got, []Role{RolePipeline, RoleAuditor}) {
		t.Fatalf("ParseRoles = %v, %v", got, err)
	}
	if _, err := ParseRoles("pipeline,root"); err == nil || !strings.Contains(err.Error(), `"root" is not a role`) {
		t.Fatalf("ParseRoles(root): %v", err)
	}
}

// FuzzParseTokens: a token file is outside input. Parsing never panics,
// and whatever parses holds only valid names, roles and hashes.
func FuzzParseTokens(f *testing.F) {
	f.Add([]byte(tokenYAML(testToken{"a", "t", []Role{RolePipeline}})))
	f.Add([]byte("tokens:\n  - {name: a, sha256: " + HashToken("x") + ", roles: [auditor, pipeline]}\n"))
	f.Add([]byte("tokens: [\n"))
	f.Add([]byte("tokens:\n  - name: &a x\n    sha256: *a\n"))
	f.Add([]byte("tokens:\n  - {name: a, sha256: " + HashToken("x") + ", roles: [pipeline], calls: [\"tenant-a-\", \"\"]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := ParseTokens(data, "fuzz.yaml")
		if err != nil {
			return
		}
		if set.Len() == 0 {
			t.Fatal("parsed a set with no tokens")
		}
		for _, tok := range set.tokens {
			if !ValidTokenName(tok.Name) || len(tok.Roles) == 0 {
				t.Fatalf("parsed an invalid entry %+v", tok)
			}
			for _, p := range tok.Calls {
				if p == "" || strings.ContainsAny(p, ".*> \t\r\n") {
					t.Fatalf("parsed a call prefix no call id could start with: %q", p)
				}
			}
		}
	})
}

// TestTokenCalls: a token's calls: binds it to call-id prefixes; an empty
// list, an empty prefix or one no call id could start with is refused.
func TestTokenCalls(t *testing.T) {
	entry := TokenEntry("t", NewToken(), []Role{RolePipeline})
	set, err := ParseTokens([]byte("tokens:\n"+entry+"    calls: [\"tenant-a-\", \"ta-\"]\n"), "f")
	if err != nil {
		t.Fatal(err)
	}
	id := Identity{TokenName: "t", Calls: set.tokens[0].Calls}
	for call, want := range map[string]bool{"tenant-a-1": true, "ta-9": true, "tenant-b-1": false, "tenant-": false} {
		if got := id.MayCall(call); got != want {
			t.Errorf("MayCall(%q) = %v, want %v", call, got, want)
		}
	}
	if !(Identity{NoTokens: true}).MayCall("x") || !(Identity{TokenName: "u"}).MayCall("x") {
		t.Error("a guard without tokens, or a token bound to no calls, must reach every call")
	}
	for _, bad := range []string{"[]", `[""]`, `["a.b"]`, `["a b"]`, "x"} {
		if _, err := ParseTokens([]byte("tokens:\n"+entry+"    calls: "+bad+"\n"), "f"); err == nil || !strings.Contains(err.Error(), "calls") {
			t.Errorf("calls: %s: %v, want an error naming calls", bad, err)
		}
	}
}
