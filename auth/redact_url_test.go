package auth

import (
	"net/url"
	"strings"
	"testing"
)

func TestRedactURLs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://pipeline:s3cret@nats:4222", "nats://pipeline:xxxxx@nats:4222"},
		{"nats://s3cret-token@nats:4222", "nats://xxxxx@nats:4222"},
		{"nats://a:p1@h1:4222,nats://b:p2@h2:4222", "nats://a:xxxxx@h1:4222,nats://b:xxxxx@h2:4222"},
		{"nats://a:p1@h1, tls://tok@h2", "nats://a:xxxxx@h1, tls://xxxxx@h2"},
		{"user:pw@nats:4222", "user:xxxxx@nats:4222"},
		{"nats://u:p@ss@host:4222", "nats://u:xxxxx@xxxxx@host:4222"},
		{`parse "nats://u:pw@ho st": invalid character " " in host name`, `parse "nats://u:xxxxx@ho st": invalid character " " in host name`},
		{"--nats-url=nats://u:pw@h", "--nats-url=nats://u:xxxxx@h"},
		{"wss://h/path@x", "wss://h/path@x"},
		{"no url here", "no url here"},
	} {
		if got := RedactURLs(tc.in); got != tc.want {
			t.Errorf("RedactURLs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if !URLHasCredentials("nats://h1,nats://u:p@h2") || URLHasCredentials("nats://h1:4222") {
		t.Error("URLHasCredentials")
	}
}

// FuzzRedactURLs: whatever password or token a URL carries, redaction
// leaves no trace of it, alone, in a list or quoted in an error.
func FuzzRedactURLs(f *testing.F) {
	f.Add("pipeline", "s3cr3t-password", "nats:4222")
	f.Add("", "tok", "h")
	f.Add("u", "p@ss:w/rd(1),;=", "[::1]:4222")
	f.Fuzz(func(t *testing.T, user, secret, host string) {
		const marker = "Q7z" // the secret starts with it; nothing else holds it
		if host == "" || strings.ContainsAny(host, "@/") || strings.Contains(user+host, marker) {
			t.Skip()
		}
		secret = marker + secret
		u := &url.URL{Scheme: "nats", User: url.User(secret), Host: host}
		if user != "" {
			u.User = url.UserPassword(user, secret)
		}
		s := u.String()
		for _, text := range []string{s, "connect to " + s + ": refused", "nats://h," + s, `parse "` + s + `": bad`} {
			if got := RedactURLs(text); strings.Contains(got, marker) {
				t.Fatalf("RedactURLs(%q) = %q still holds the secret", text, got)
			}
		}
	})
}
