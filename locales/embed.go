// Package locales embeds the language files the guard ships with
// (<lang>.yaml). The format is documented in docs/locales.md; the patterns
// package reads them.
package locales

import "embed"

// FS holds every <lang>.yaml of this directory.
//
//go:embed *.yaml
var FS embed.FS
