package auth

import "strings"

// redactedSecret replaces a password or token, as net/url's Redacted does.
const redactedSecret = "xxxxx"

// RedactURLs hides the credentials of every URL in s: a comma-separated
// URL list (--nats-url), or any text that quotes one (an error from
// url.Parse or a dialer). It is the one redaction helper for URLs: every
// log line, error, metric label or CLI output that may hold a URL passes
// through it.
//
// "scheme://user:password@host" becomes "scheme://user:xxxxx@host", and
// "scheme://token@host" (NATS takes a bare token as the user part)
// becomes "scheme://xxxxx@host"; so do the scheme-less forms NATS accepts
// ("user:password@host:4222"). It errs on the side of hiding: the part
// before the '@' of an e-mail address in free text is hidden too.
func RedactURLs(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '@' {
			continue
		}
		start := i
		for start > 0 && isUserinfoByte(s[start-1]) {
			start--
		}
		if start == i || start < last {
			continue
		}
		// Stopped at a '/': userinfo only right after "scheme://"; any
		// other '/' means the '@' is in a path.
		if start > 0 && s[start-1] == '/' && !(start >= 3 && s[start-2] == '/' && s[start-3] == ':') {
			continue
		}
		red := redactedSecret
		if user, _, hasPassword := strings.Cut(s[start:i], ":"); hasPassword && user != "" {
			red = user + ":" + redactedSecret
		}
		b.WriteString(s[last:start])
		b.WriteString(red)
		last = i
	}
	b.WriteString(s[last:])
	return b.String()
}

// URLHasCredentials reports whether any URL in urls carries a password or
// token.
func URLHasCredentials(urls string) bool { return RedactURLs(urls) != urls }

// isUserinfoByte reports whether c may be part of a URL's userinfo: what
// url.Parse accepts there (RFC 3986 unreserved, sub-delims, ':', '%'),
// and any non-ASCII byte, since a URL that fails to parse is still quoted
// in its error. It ends the scan back from an '@' at anything else: white
// space, quotes, '/', '@'.
func isUserinfoByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c >= 0x80:
		return true
	}
	return strings.IndexByte("-._~:!$&'()*+,;=%", c) >= 0
}
