package auth

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"

	"github.com/yesguard/yesguard/metrics"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// accessKind is how a method is guarded.
type accessKind int

const (
	// accessDenied refuses every call; the zero value, so a method missing
	// from the table is denied.
	accessDenied accessKind = iota
	// accessOpen lets every call through, token or not.
	accessOpen
	// accessAnyRole needs a valid token, of any role.
	accessAnyRole
	// accessRole needs a token holding one role.
	accessRole
)

// Access is what a method needs. The zero Access denies.
type Access struct {
	kind accessKind
	role Role
	// why is said to a caller a Denied method refuses.
	why string
}

// Open lets every call through, with or without a token.
func Open() Access { return Access{kind: accessOpen} }

// AnyRole needs a valid token, whatever its roles.
func AnyRole() Access { return Access{kind: accessAnyRole} }

// NeedRole needs a token holding r.
func NeedRole(r Role) Access { return Access{kind: accessRole, role: r} }

// Denied refuses every call, telling the caller why.
func Denied(why string) Access { return Access{kind: accessDenied, why: why} }

// Methods maps each full gRPC method name ("/yesguard.v1.Guard/Check") to
// what it needs. A method not in it is denied.
type Methods map[string]Access

// MethodOptions are the choices DefaultMethods leaves to the operator.
type MethodOptions struct {
	// Reflection lets any valid token use server reflection (grpcurl's
	// list and describe). Off, reflection is denied even to a valid token,
	// and the server should not register it at all.
	Reflection bool
}

// DefaultMethods is yesguard's table:
//
//   - Check, Complete, Redeem: the pipeline role (they act for the caller;
//     only whoever got the ALLOW may free its reservation).
//   - PublishTranscript: the pipeline role (it speaks for the caller, as
//     the NATS users that may publish transcripts do).
//   - ListDecisions: the auditor role (it returns the caller's words).
//   - Health (Check, List, Watch): open, so that container and load
//     balancer health checks need no secret; it tells only SERVING or
//     NOT_SERVING.
//   - Reflection: any valid token when MethodOptions.Reflection, else
//     denied. It describes only the public contract (the .proto is
//     public), but an open reflection service is how a scanner learns what
//     it can call, so it asks for a token like every other method.
func DefaultMethods(o MethodOptions) Methods {
	m := Methods{
		yesguardv1.Guard_Check_FullMethodName:             NeedRole(RolePipeline),
		yesguardv1.Guard_Complete_FullMethodName:          NeedRole(RolePipeline),
		yesguardv1.Guard_Redeem_FullMethodName:            NeedRole(RolePipeline),
		yesguardv1.Guard_ListDecisions_FullMethodName:     NeedRole(RoleAuditor),
		yesguardv1.Guard_PublishTranscript_FullMethodName: NeedRole(RolePipeline),
		healthgrpc.Health_Check_FullMethodName:            Open(),
		healthgrpc.Health_List_FullMethodName:             Open(),
		healthgrpc.Health_Watch_FullMethodName:            Open(),
	}
	reflection := AnyRole()
	if !o.Reflection {
		reflection = Denied("server reflection is off on this guard; use the .proto (proto/yesguard/v1/guard.proto) instead")
	}
	m[reflectionv1.ServerReflection_ServerReflectionInfo_FullMethodName] = reflection
	m[reflectionv1alpha.ServerReflection_ServerReflectionInfo_FullMethodName] = reflection
	return m
}

// Identity is who made a call, as the interceptors established it.
type Identity struct {
	// TokenName is the name of the caller's token in the token file; empty
	// when no tokens are configured.
	TokenName string
	// Roles are the token's roles.
	Roles []Role
	// Calls are the token's call-id prefixes (Token.Calls); empty, every
	// call.
	Calls []string
	// ClientSubject is the subject of the client certificate the TLS
	// handshake verified; empty without mutual TLS.
	ClientSubject string
	// NoTokens is set when the guard runs without a token file: nothing
	// was checked beyond the transport, and every role is granted (the
	// loopback default).
	NoTokens bool
}

// Has reports whether the caller may act in role r. It is false for the
// zero Identity, so a service that finds no Identity in its context
// refuses.
func (id Identity) Has(r Role) bool {
	if id.NoTokens {
		return true
	}
	for _, have := range id.Roles {
		if have == r {
			return true
		}
	}
	return false
}

// MayCall reports whether the caller may act on, or read, call callID:
// always without tokens or for a token bound to no calls, else only when
// callID starts with one of the token's prefixes.
func (id Identity) MayCall(callID string) bool {
	if id.NoTokens || len(id.Calls) == 0 {
		return true
	}
	for _, p := range id.Calls {
		if strings.HasPrefix(callID, p) {
			return true
		}
	}
	return false
}

// RequireCall is the service's check of a call id against the caller's
// token (MayCall): PermissionDenied, saying which calls the token has,
// unless it may. A context without an Identity is refused.
func RequireCall(ctx context.Context, callID string) error {
	id, ok := FromContext(ctx)
	if !ok {
		return status.Error(codes.PermissionDenied, "no caller identity: the guard's authorisation is not installed")
	}
	if !id.MayCall(callID) {
		return status.Errorf(codes.PermissionDenied, "%s may act only on calls whose id starts with %q, not on call %q: use the token of that call's tenant",
			id, id.Calls, callID)
	}
	return nil
}

// String describes the caller for a log line: the token's name and roles
// and the certificate's subject, never the token.
func (id Identity) String() string {
	var parts []string
	switch {
	case id.TokenName != "":
		parts = append(parts, fmt.Sprintf("token %s [%s]", id.TokenName, joinRoles(id.Roles, ",")))
	case id.NoTokens:
		parts = append(parts, "no tokens configured")
	default:
		parts = append(parts, "anonymous")
	}
	if id.ClientSubject != "" {
		parts = append(parts, "cert "+id.ClientSubject)
	}
	return strings.Join(parts, ", ")
}

// Owner names the caller as the holder of what its calls reserve (an
// ALLOW's reservation): its token's name when it has one, else its client
// certificate's subject, else "" (a guard without tokens or client
// certificates: every caller is the one identity). Token and certificate
// names live in separate namespaces, so neither can pose as the other.
func (id Identity) Owner() string {
	switch {
	case id.TokenName != "":
		return "token:" + id.TokenName
	case id.ClientSubject != "":
		return "cert:" + id.ClientSubject
	}
	return ""
}

// identityKey is the context key of an Identity.
type identityKey struct{}

// NewContext returns ctx carrying id, as the interceptors do (and tests of
// a service without them).
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the caller's Identity. ok is false when no
// interceptor put one there; the zero Identity has no role.
func FromContext(ctx context.Context) (id Identity, ok bool) {
	id, ok = ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// AuthorizerConfig builds an Authorizer.
type AuthorizerConfig struct {
	// Tokens is the token file. Nil runs without tokens: every method the
	// table does not deny is let through (the loopback default).
	Tokens *Tokens
	// Methods is the method table; nil is DefaultMethods(MethodOptions{}).
	Methods Methods
	// Logger receives one line per refusal; nil logs nothing.
	Logger *zap.Logger
	// Registerer receives yesguard_grpc_auth_refused_total; nil registers
	// nothing.
	Registerer prometheus.Registerer
}

// Authorizer checks every gRPC call against the token file and the method
// table. It is safe for concurrent use; it holds no state of its own but
// the table, which it never changes.
type Authorizer struct {
	tokens  *Tokens
	methods Methods
	log     *zap.Logger
	refused *prometheus.CounterVec
}

// NewAuthorizer returns an Authorizer. It fails only when the metric
// cannot be registered.
func NewAuthorizer(cfg AuthorizerConfig) (*Authorizer, error) {
	a := &Authorizer{tokens: cfg.Tokens, methods: cfg.Methods, log: cfg.Logger}
	if a.methods == nil {
		a.methods = DefaultMethods(MethodOptions{})
	}
	if a.log == nil {
		a.log = zap.NewNop()
	}
	a.refused = metrics.AuthRefused.Collector().(*prometheus.CounterVec)
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(a.refused); err != nil {
			return nil, fmt.Errorf("register auth metrics: %w", err)
		}
	}
	return a, nil
}

// ServerOptions installs the interceptors; give them to grpc.NewServer
// before any other interceptor, so that nothing runs for a refused call.
func (a *Authorizer) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(a.UnaryInterceptor),
		grpc.ChainStreamInterceptor(a.StreamInterceptor),
	}
}

// UnaryInterceptor authorises a unary call and passes its Identity on.
func (a *Authorizer) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	id, err := a.Authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(NewContext(ctx, id), req)
}

// StreamInterceptor authorises a stream and passes its Identity on.
func (a *Authorizer) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	id, err := a.Authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &identityStream{ServerStream: ss, ctx: NewContext(ss.Context(), id)})
}

// identityStream is a stream whose context carries the Identity.
type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identityStream) Context() context.Context { return s.ctx }

// Authorize decides one call of method from its metadata and peer, and
// returns the caller's Identity or a status error for the client: codes
// Unauthenticated or PermissionDenied, with a message that says what to do.
func (a *Authorizer) Authorize(ctx context.Context, method string) (Identity, error) {
	id := Identity{ClientSubject: clientSubject(ctx)}
	access, listed := a.methods[method]
	if !listed {
		return id, a.refuse(ctx, method, id, codes.PermissionDenied,
			fmt.Sprintf("%s is not in yesguard's method table, so no role may call it", method))
	}
	switch access.kind {
	case accessOpen:
		id.NoTokens = a.tokens == nil
		return id, nil
	case accessDenied:
		return id, a.refuse(ctx, method, id, codes.PermissionDenied, access.why)
	}
	if a.tokens == nil {
		id.NoTokens = true
		return id, nil
	}
	token, msg := bearerToken(ctx)
	if msg != "" {
		return id, a.refuse(ctx, method, id, codes.Unauthenticated, msg)
	}
	tok, ok := a.tokens.Lookup(token)
	if !ok {
		return id, a.refuse(ctx, method, id, codes.Unauthenticated,
			"the bearer token is not one this guard knows (mistyped, revoked, or for another deployment); "+
				"ask the guard's operator for a token and send it as 'authorization: Bearer <token>'")
	}
	id.TokenName, id.Roles, id.Calls = tok.Name, tok.Roles, tok.Calls
	if access.kind == accessRole && !tok.Has(access.role) {
		return id, a.refuse(ctx, method, id, codes.PermissionDenied,
			fmt.Sprintf("token %q has roles [%s]; %s needs the %s role: call it with a token that has it",
				tok.Name, joinRoles(tok.Roles, ","), method, access.role))
	}
	return id, nil
}

// bearerToken reads the one "authorization: Bearer <token>" of a call, or
// says what is wrong with it.
func bearerToken(ctx context.Context) (token, problem string) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	switch {
	case len(vals) == 0:
		return "", "this guard needs a bearer token: send metadata 'authorization: Bearer <token>' " +
			"(the yesguard CLI: --token or YESGUARD_TOKEN); ask the guard's operator for one"
	case len(vals) > 1:
		return "", "more than one authorization header: send exactly one, 'authorization: Bearer <token>'"
	}
	scheme, tok, found := strings.Cut(vals[0], " ")
	tok = strings.TrimSpace(tok)
	switch {
	case !found || !strings.EqualFold(scheme, "bearer"):
		return "", "the authorization header is not a bearer token: send 'authorization: Bearer <token>'"
	case tok == "":
		return "", "the bearer token is empty: send 'authorization: Bearer <token>'"
	case len(tok) > maxTokenBytes:
		return "", fmt.Sprintf("the bearer token is longer than %d bytes, so it is none of this guard's", maxTokenBytes)
	}
	return tok, ""
}

// refuse counts and logs a refusal and returns its status error. The
// token is never logged: its name is, when it was known.
func (a *Authorizer) refuse(ctx context.Context, method string, id Identity, code codes.Code, msg string) error {
	a.refused.WithLabelValues(method, code.String()).Inc()
	fields := []zap.Field{zap.String("method", method), zap.String("code", code.String()), zap.String("caller", id.String()), zap.String("reason", msg)}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		fields = append(fields, zap.String("peer", p.Addr.String()))
	}
	// A known token calling what it may not is a misconfiguration or a
	// misused token: a warning. A call without a valid token is what a
	// scanner sends: debug, so that it cannot flood the log.
	if code == codes.PermissionDenied && id.TokenName != "" {
		a.log.Warn("gRPC call refused", fields...)
	} else {
		a.log.Debug("gRPC call refused", fields...)
	}
	return status.Error(code, msg)
}

// clientSubject is the subject of the client certificate the handshake
// verified, if any.
func clientSubject(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return ""
	}
	return info.State.VerifiedChains[0][0].Subject.String()
}

// RequireRole is the service's own check, behind the interceptor's: it
// returns a PermissionDenied status unless the caller in ctx holds r. A
// context without an Identity (no interceptor installed) is refused.
func RequireRole(ctx context.Context, r Role) error {
	id, ok := FromContext(ctx)
	if !ok {
		return status.Error(codes.PermissionDenied, "no caller identity: the guard's authorisation is not installed")
	}
	if !id.Has(r) {
		return status.Errorf(codes.PermissionDenied, "%s: only the %s role may do this", id, r)
	}
	return nil
}
