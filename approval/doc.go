// Package approval is the signed approval of an ALLOW: what the guard
// issues, and what the system of record (the booking, payment or claims
// backend) imports to check for itself, offline, that the caller approved
// this exact action, and to execute it once.
//
// This first part is the canonical JSON both sides hash the arguments in.
//
// # Canonical JSON
//
// CanonicalArgs, CanonicalMap and CanonicalJSON are the one canonical form
// of a tool call's arguments, whose ArgsHash the guard records and binds:
// keys sorted by their UTF-8 bytes, numbers as float64 in ES6 form, strings
// with minimal escapes; testdata/canonical-vectors.json holds vectors any
// language can run.
package approval
