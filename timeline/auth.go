package timeline

import (
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/yesguard/yesguard/auth"
)

// sessionAge is how long the token form's cookie lasts.
const sessionAge = 8 * time.Hour

// maxTokenBytes bounds a presented token (auth's own bound is lower: a
// longer one is simply unknown).
const maxTokenBytes = 1024

// loginPage is the token form's content.
type loginPage struct {
	// Next is the page to go to once signed in.
	Next string
	// Problem says why the last attempt failed.
	Problem  string
	SignedIn bool
}

// presented returns the request's token: the bearer token of its
// Authorization header, else its cookie; "" when it has neither.
func presented(r *http.Request) (token string, fromHeader bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, _ := strings.Cut(h, " ")
		if strings.EqualFold(scheme, "bearer") {
			return strings.TrimSpace(tok), true
		}
		return "", true
	}
	if c, err := r.Cookie(Cookie); err == nil {
		return c.Value, false
	}
	return "", false
}

// signedIn reports whether the page should offer to sign out: tokens are
// on and the request came with the form's cookie.
func (h *Handler) signedIn(r *http.Request) bool {
	if h.cfg.Tokens == nil {
		return false
	}
	_, err := r.Cookie(Cookie)
	return err == nil
}

// guarded lets a request through when tokens are off, or when it carries a
// token holding the auditor role. Otherwise a browser gets the token form
// (401) or a page saying which role is needed (403).
func (h *Handler) guarded(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.cfg.Tokens == nil {
			next(w, r.WithContext(auth.NewContext(r.Context(), auth.Identity{NoTokens: true})))
			return
		}
		token, fromHeader := presented(r)
		if token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="yesguard"`)
			problem := ""
			if fromHeader {
				problem = "The Authorization header is not a bearer token: send 'Authorization: Bearer <token>'."
			}
			h.render(w, r, http.StatusUnauthorized, "login.html", loginPage{Next: r.URL.RequestURI(), Problem: problem})
			return
		}
		tok, ok := h.lookup(token)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="yesguard", error="invalid_token"`)
			if !fromHeader {
				clearCookie(w, r)
			}
			h.render(w, r, http.StatusUnauthorized, "login.html", loginPage{Next: r.URL.RequestURI(),
				Problem: "That token is not one this guard knows (mistyped, revoked, or for another deployment)."})
			return
		}
		if !tok.Has(auth.RoleAuditor) {
			h.problem(w, r, http.StatusForbidden, "This token may not read calls",
				"Token "+tok.Name+" does not hold the auditor role, which reading calls needs. Sign in with an auditor token ('yesguard token --roles auditor' makes one).")
			return
		}
		// The service sees who reads, as the gRPC interceptor would tell it
		// (auth.RequireRole).
		next(w, r.WithContext(auth.NewContext(r.Context(), auth.Identity{TokenName: tok.Name, Roles: tok.Roles, Calls: tok.Calls})))
	})
}

func (h *Handler) lookup(token string) (auth.Token, bool) {
	if len(token) > maxTokenBytes {
		return auth.Token{}, false
	}
	return h.cfg.Tokens.Lookup(token)
}

// session serves POST /calls: the token form signs in (sets the cookie)
// or out (clears it). Only a form from this site is taken.
func (h *Handler) session(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		h.problem(w, r, http.StatusForbidden, "Refused", "The form was sent from another site.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		h.problem(w, r, http.StatusBadRequest, "Bad form", err.Error())
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	if r.PostForm.Has("logout") {
		clearCookie(w, r)
		http.Redirect(w, r, Path, http.StatusSeeOther)
		return
	}
	if h.cfg.Tokens == nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	tok, ok := h.lookup(token)
	switch {
	case token == "":
		h.render(w, r, http.StatusUnauthorized, "login.html", loginPage{Next: next, Problem: "Enter a token."})
		return
	case !ok:
		h.render(w, r, http.StatusUnauthorized, "login.html", loginPage{Next: next,
			Problem: "That token is not one this guard knows (mistyped, revoked, or for another deployment)."})
		return
	case !tok.Has(auth.RoleAuditor):
		h.render(w, r, http.StatusForbidden, "login.html", loginPage{Next: next,
			Problem: "Token " + tok.Name + " does not hold the auditor role, which reading calls needs."})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: Cookie, Value: token, Path: Path,
		MaxAge: int(sessionAge.Seconds()), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: Cookie, Value: "", Path: Path, MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// sameOrigin reports whether a form POST came from this site: its Origin
// (or, without one, its Referer) names this host, or neither is sent (a
// client that is not a browser).
func sameOrigin(r *http.Request) bool {
	from := r.Header.Get("Origin")
	if from == "" {
		from = r.Header.Get("Referer")
	}
	if from == "" {
		return true
	}
	u, err := url.Parse(from)
	return err == nil && u.Host == r.Host
}

// safeNext keeps a sign-in's destination on these pages: a path under
// Path, never another site nor another page of the listener (/metrics).
// The path is judged as a browser will resolve it: decoded ("%2e%2e" is
// ".."), dot segments removed; a backslash, which browsers read as a
// slash, is refused whole. The destination is the cleaned path and the
// query; anything else is Path.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsRune(next, '\\') {
		return Path
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" {
		return Path
	}
	clean := path.Clean(u.Path)
	if clean != Path && !strings.HasPrefix(clean, Path+"/") {
		return Path
	}
	return (&url.URL{Path: clean, RawQuery: u.RawQuery}).RequestURI()
}
