package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"go.yaml.in/yaml/v3"
)

// Role is what a token may do. A token holds one or more.
type Role string

// Roles.
const (
	// RolePipeline may Check, Complete, Redeem and PublishTranscript: it
	// acts for the caller.
	RolePipeline Role = "pipeline"
	// RoleAuditor may ListDecisions: it reads calls.
	RoleAuditor Role = "auditor"
)

// roles lists every role, in the order messages name them.
func roles() []Role { return []Role{RolePipeline, RoleAuditor} }

// TokenPrefix starts every token NewToken makes, so that secret scanners
// and people can tell a yesguard token from other secrets.
const TokenPrefix = "yg_"

// tokenBytes is the entropy of a token NewToken makes.
const tokenBytes = 32

// maxTokenBytes bounds a presented token: longer ones are malformed.
const maxTokenBytes = 512

// NewToken returns a new random token: TokenPrefix and 32 bytes from
// crypto/rand (which never fails: it crashes the process first), base64url
// without padding.
func NewToken() string {
	b := make([]byte, tokenBytes)
	_, _ = rand.Read(b)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// HashToken is what a token file stores of a token: the hex SHA-256 of its
// bytes.
//
// A fast hash is right here, and a password hash (bcrypt, argon2) is not:
// tokens are 256-bit random secrets, not words a person chose, so there is
// no dictionary to try and a preimage search over 2^256 inputs is out of
// reach at any hash speed. A slow hash would only add its cost (tens of
// milliseconds, by design) to every call on the Check path, and hand
// anyone who can reach the port a cheap way to burn the guard's CPU.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Token is one entry of a token file.
type Token struct {
	// Name identifies the token in logs and in the Identity; never the
	// token itself.
	Name  string
	Roles []Role
	// Calls, when not empty, binds the token to the calls whose id starts
	// with one of these prefixes (a tenant's): a call on any other is
	// PermissionDenied (Identity.MayCall). Empty: every call.
	Calls []string
	sum   [sha256.Size]byte
}

// Has reports whether the token holds role r.
func (t Token) Has(r Role) bool { return slices.Contains(t.Roles, r) }

// TokenSet is a parsed token file. It is immutable.
type TokenSet struct {
	tokens []Token
}

// Len is the number of tokens.
func (s *TokenSet) Len() int { return len(s.tokens) }

// Names lists the tokens' names in file order, for a start-up log line.
func (s *TokenSet) Names() []string {
	names := make([]string, len(s.tokens))
	for i, t := range s.tokens {
		names[i] = t.Name
	}
	return names
}

// Lookup finds the token whose hash is token's. It compares the hash with
// every entry in constant time and does not stop at a match, so neither
// the time nor the order of entries tells which one, or how much of a
// hash, matched.
func (s *TokenSet) Lookup(token string) (Token, bool) {
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range s.tokens {
		if subtle.ConstantTimeCompare(s.tokens[i].sum[:], sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Token{}, false
	}
	return s.tokens[found], true
}

// Tokens is a token file loaded from disk and reloaded on demand. Lookups
// may run concurrently with Reload: each sees one whole set.
type Tokens struct {
	path string
	set  atomic.Pointer[TokenSet]
}

// LoadTokens reads and validates the token file at path:
//
//	# yesguard tokens: hashes only; make a token and its entry with `yesguard token`
//	tokens:
//	  - name: pipeline-eu          # logged; letters, digits, '.', '_', '-'
//	    sha256: 3a7bd3e2...        # HashToken of the token: 64 hex digits
//	    roles: [pipeline]          # pipeline, auditor, or both
//	  - name: audit-team
//	    sha256: 9c56cc51...
//	    roles: [auditor]
//	  - name: tenant-a
//	    sha256: 5e884898...
//	    roles: [pipeline]
//	    calls: ["tenant-a-"]       # optional: only calls whose id starts so
//
// Every problem is reported at once, each as path:line: field: what is
// wrong. A file with no tokens is an error (it would lock every client
// out, which is more often a truncated file than an intent).
func LoadTokens(path string) (*Tokens, error) {
	set, err := readTokenSet(path)
	if err != nil {
		return nil, err
	}
	t := &Tokens{path: path}
	t.set.Store(set)
	return t, nil
}

// Reload reads the file again and swaps the new set in atomically. On any
// error it keeps the set it had and returns the error.
func (t *Tokens) Reload() error {
	set, err := readTokenSet(t.path)
	if err != nil {
		return err
	}
	t.set.Store(set)
	return nil
}

// Path is the file the tokens come from.
func (t *Tokens) Path() string { return t.path }

// Current is the set in force now.
func (t *Tokens) Current() *TokenSet { return t.set.Load() }

// Lookup finds token in the set in force now.
func (t *Tokens) Lookup(token string) (Token, bool) { return t.set.Load().Lookup(token) }

func readTokenSet(path string) (*TokenSet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read token file: %w", err)
	}
	return ParseTokens(data, path)
}

// ParseTokens parses a token file's contents; source names it in errors.
func ParseTokens(data []byte, source string) (*TokenSet, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	p := tokenParser{source: source}
	set := &TokenSet{}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty; want a tokens: list (make an entry with 'yesguard token')", source)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: want a mapping with a tokens: list", source, root.Line)
	}
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "tokens" {
			p.errf(k, "%s: unknown key (want tokens)", k.Value)
			continue
		}
		list = v
	}
	switch {
	case list == nil:
		p.errf(root, "tokens: missing")
	case list.Kind != yaml.SequenceNode:
		p.errf(list, "tokens: want a list of {name, sha256, roles}")
	case len(list.Content) == 0:
		p.errf(list, "tokens: empty; a file that grants nothing locks every client out")
	default:
		names := map[string]int{}
		sums := map[[sha256.Size]byte]int{}
		for i, item := range list.Content {
			tok, ok := p.entry(fmt.Sprintf("tokens[%d]", i), item)
			if !ok {
				continue
			}
			if line, dup := names[tok.Name]; dup {
				p.errf(item, "tokens[%d].name: %q is also the name at line %d; names must be unique", i, tok.Name, line)
			}
			if line, dup := sums[tok.sum]; dup {
				p.errf(item, "tokens[%d].sha256: the same hash as the entry at line %d; one token, one entry", i, line)
			}
			names[tok.Name], sums[tok.sum] = item.Line, item.Line
			set.tokens = append(set.tokens, tok)
		}
	}
	if err := errors.Join(p.errs...); err != nil {
		return nil, err
	}
	return set, nil
}

// tokenParser gathers every problem of a file, each with its line.
type tokenParser struct {
	source string
	errs   []error
}

func (p *tokenParser) errf(n *yaml.Node, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s:%d: %s", p.source, n.Line, fmt.Sprintf(format, args...)))
}

func (p *tokenParser) entry(field string, n *yaml.Node) (Token, bool) {
	if n.Kind != yaml.MappingNode {
		p.errf(n, "%s: want {name, sha256, roles}", field)
		return Token{}, false
	}
	var tok Token
	var seen = map[string]bool{}
	bad := len(p.errs)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := field + "." + k.Value
		if seen[k.Value] {
			p.errf(k, "%s: given twice", key)
			continue
		}
		seen[k.Value] = true
		switch k.Value {
		case "name":
			switch {
			case v.Kind != yaml.ScalarNode:
				p.errf(v, "%s: want a string", key)
			case !ValidTokenName(v.Value):
				p.errf(v, "%s: %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", key, v.Value)
			default:
				tok.Name = v.Value
			}
		case "sha256":
			s := strings.ToLower(strings.TrimSpace(v.Value))
			switch {
			case v.Kind != yaml.ScalarNode:
				p.errf(v, "%s: want a string", key)
			case strings.HasPrefix(v.Value, TokenPrefix):
				// Never echo it: it is a secret written where it should not be.
				p.errf(v, "%s: this is a token, not its hash. The file must hold hashes only: "+
					"put the output of 'yesguard token hash' here, and treat this token as exposed (make a new one)", key)
			case len(s) != 2*sha256.Size || !isHex(s):
				p.errf(v, "%s: want the 64 hex digits of the token's SHA-256 (make a token and its entry with 'yesguard token')", key)
			default:
				_, _ = hex.Decode(tok.sum[:], []byte(s))
			}
		case "roles":
			tok.Roles = p.roles(key, v)
		case "calls":
			tok.Calls = p.calls(key, v)
		default:
			p.errf(k, "%s: unknown key (want name, sha256, roles, calls)", key)
		}
	}
	for _, k := range []string{"name", "sha256", "roles"} {
		if !seen[k] {
			p.errf(n, "%s.%s: missing", field, k)
		}
	}
	return tok, len(p.errs) == bad
}

func (p *tokenParser) roles(key string, v *yaml.Node) []Role {
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		p.errf(v, "%s: want a list of one or more of %s, e.g. [pipeline]", key, roleList())
		return nil
	}
	var out []Role
	for j, r := range v.Content {
		role := Role(r.Value)
		switch {
		case r.Kind != yaml.ScalarNode || !slices.Contains(roles(), role):
			p.errf(r, "%s[%d]: %q is not a role; want %s", key, j, r.Value, roleList())
		case slices.Contains(out, role):
			p.errf(r, "%s[%d]: %q given twice", key, j, r.Value)
		default:
			out = append(out, role)
		}
	}
	return out
}

// calls parses a token's call-id prefixes: a non-empty list (an empty one
// would grant no call, which is more often a mistake than an intent) of
// non-empty prefixes that a call id could start with.
func (p *tokenParser) calls(key string, v *yaml.Node) []string {
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		p.errf(v, "%s: want a list of one or more call-id prefixes, e.g. [\"tenant-a-\"]; leave calls out for every call", key)
		return nil
	}
	var out []string
	for j, c := range v.Content {
		switch {
		case c.Kind != yaml.ScalarNode || c.Value == "" || len(c.Value) > maxCallPrefix:
			p.errf(c, "%s[%d]: want a call-id prefix of 1 to %d bytes", key, j, maxCallPrefix)
		case strings.ContainsAny(c.Value, ".*> \t\r\n"):
			p.errf(c, "%s[%d]: %q: a call id holds no '.', '*', '>' or spaces, so no call would match", key, j, c.Value)
		default:
			out = append(out, c.Value)
		}
	}
	return out
}

// maxCallPrefix is the longest call-id prefix: a call id's own bound.
const maxCallPrefix = 128

func roleList() string { return joinRoles(roles(), ", ") }

// joinRoles writes roles with sep between them.
func joinRoles(rs []Role, sep string) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, sep)
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// TokenEntry is the YAML entry of a token file for a token, as `yesguard
// token` prints it.
func TokenEntry(name, token string, rs []Role) string {
	return fmt.Sprintf("  - name: %s\n    sha256: %s\n    roles: [%s]\n", name, HashToken(token), joinRoles(rs, ", "))
}

// ParseRoles parses a comma-separated role list ("pipeline,auditor").
func ParseRoles(s string) ([]Role, error) {
	var out []Role
	for _, f := range strings.Split(s, ",") {
		r := Role(strings.TrimSpace(f))
		if !slices.Contains(roles(), r) {
			return nil, fmt.Errorf("%q is not a role; want %s", f, roleList())
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// ValidTokenName reports whether name can name a token in a token file:
// 1 to 64 ASCII letters, digits, '.', '_' or '-', starting with a letter
// or digit, so that it is safe in a log line.
func ValidTokenName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}
