// Package approval is the signed approval of an ALLOW: what the guard
// issues, and what the system of record (the booking, payment or claims
// backend) imports to check for itself, offline, that the caller approved
// this exact action, and to execute it once.
//
// # The token
//
// An approval is a JWT in JWS compact serialization, signed with EdDSA
// (Ed25519, RFC 8037). github.com/go-jose/go-jose/v4 verifies it and
// publishes the keys (JWK, JWKS, RFC 7638 thumbprints); the signing is the
// few lines of RFC 7515's compact form around crypto/ed25519, so that an
// ALLOW pays for the signature and little else.
//
// JWS was chosen over PASETO v4.public, which is as sound a format, because
// the guard must publish its keys as a JWKS at /.well-known/jwks.json, and
// JWKS, kid and key rotation are JOSE's own (RFC 7517, RFC 7638): every
// language a backend is written in has a maintained JOSE library that
// fetches a JWKS and verifies EdDSA, while PASETO's key-set counterpart
// (PASERK) has few. go-jose is maintained, has the JWK and JWKS types,
// never accepts "alg: none", and makes the caller list the algorithms it
// accepts. JOSE's known weaknesses are closed here by refusing more than
// RFC 7515 asks: the header must be exactly {alg: EdDSA, kid, typ:
// TokenType} (no "crit", no "jwk", "jku" or "x5c" naming a key the token
// brings), each part strict base64url, so one string, and only one,
// carries a given signed approval.
//
// The claims (Claims) bind the decision id ("jti"), the call, the tool,
// the SHA-256 of the canonical arguments, the caller turn taken as the yes
// (the hash of its text, its audio times and when the guard received it),
// the issuer, the issue time and a short expiry (DefaultTTL, or the tool's
// policy value); the header names the key. docs/approvals.md is the
// contract for verifiers in other languages.
//
// # Canonical JSON
//
// CanonicalArgs, CanonicalMap and CanonicalJSON are the one canonical form
// of a tool call's arguments, whose ArgsHash the guard records and binds:
// keys sorted by their UTF-8 bytes, numbers as float64 in ES6 form, strings
// with minimal escapes; testdata/canonical-vectors.json holds vectors any
// language can run.
//
// # Keys
//
// A KeySet holds Ed25519 keys, each with the moment it starts signing: one
// signs, later ones are published ahead, retired ones verify until every
// token they signed has expired, then are dropped. Keys come from PEM
// files (LoadKeyFile, LoadKeyDir) or are generated into the data directory
// at first start (OpenKeyDir). JWKSHandler publishes the public keys.
//
// # Verifying and redeeming
//
// A Verifier checks tokens with a KeySource: the guard's own KeySet, a JWKS
// document (ParseJWKS) or a JWKS URL (RemoteJWKS). A Ledger over a
// JetStream KV bucket redeems a verified approval exactly once across
// replicas, and one caller yes once whatever approvals it was given in;
// a redeem returns a receipt, and only that receipt releases the approval
// again after a failure, so whoever merely holds the approval cannot
// reopen it; a
// MemoryLedger does the same within one process (a guard whose state is
// in memory). Both are Redeemers.
package approval
