// Package locales embeds the language files the guard ships with
// (<lang>.yaml). The format is documented in docs/locales.md; the patterns
// package reads them.
package locales

import "embed"

// FS holds every <lang>.yaml of this directory.
//
//go:embed *.yaml
var FS embed.FS

// AskFS holds ask/<lang>.yaml: how the guard says its own question in each
// language (package ask reads them; docs/locales.md documents the format).
//
//go:embed ask/*.yaml
var AskFS embed.FS
