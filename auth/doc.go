// Package auth decides who may speak for the caller and who may read the
// call: bearer tokens with roles and TLS for yesguard's gRPC API, users and
// permissions for the embedded NATS server, client options for an external
// one, and the one helper that hides credentials in URLs.
//
// # gRPC
//
// A token file (YAML, see LoadTokens) names each token and stores the
// SHA-256 of it, never the token. An Authorizer's interceptors look the
// bearer token of each call up in it and check the role the method needs
// in an explicit table (DefaultMethods): no token is codes.Unauthenticated,
// a token without the method's role is codes.PermissionDenied, a method
// the table does not list is denied. The caller's Identity (token name,
// roles, verified client certificate) travels in the context to the
// service (FromContext). ServerTLS serves certificates that Reload swaps
// without dropping connections, and with a client CA refuses, at the
// handshake, every client certificate the CA did not sign. ClientConfig
// builds the CLI's side: TLS credentials and a bearer token that is never
// sent in plaintext except to a loopback address.
//
// # NATS
//
// EmbeddedNATS gives the embedded nats-server two users: the pipeline,
// which may publish transcripts (<prefix>.>) and read only its own inbox,
// and the guard, which authenticates with an nkey made at start-up, may
// connect only in-process, and has what JetStream streams, consumers and
// KV buckets need under its own inbox prefix. Nobody else can publish or
// subscribe to transcripts. An embedded server on a non-loopback address
// without a pipeline credential refuses to start (CheckEmbeddedExposure).
// NATSClientConfig turns the --nats-* flags into nats.go options for an
// external server, with errors that name the flag.
//
// # Rules that hold
//
//   - Fail closed: an unknown method, a malformed or unknown token, an
//     unreadable or invalid file is a refusal or an error, never an allow.
//   - A reload that fails keeps what was loaded before and returns the
//     error; a reload that succeeds is one atomic swap, so a call sees the
//     old set or the new one, never a mix.
//   - Tokens, passwords and seeds are never logged or put in an error:
//     token names are, and URLs pass through RedactURLs.
//   - The package holds no globals; every value is built by its caller.
package auth
