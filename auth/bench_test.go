package auth

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/metadata"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// BenchmarkAuthorize is what the interceptor adds to each Check: reading
// the header, hashing the token and comparing it with every entry of a
// file of 10 tokens.
func BenchmarkAuthorize(b *testing.B) {
	entries := make([]testToken, 10)
	for i := range entries {
		entries[i] = testToken{fmt.Sprintf("t%d", i), NewToken(), []Role{RolePipeline}}
	}
	set, err := ParseTokens([]byte(tokenYAML(entries...)), "bench")
	if err != nil {
		b.Fatal(err)
	}
	toks := &Tokens{}
	toks.set.Store(set)
	a, err := NewAuthorizer(AuthorizerConfig{Tokens: toks})
	if err != nil {
		b.Fatal(err)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+entries[9].token))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Authorize(ctx, yesguardv1.Guard_Check_FullMethodName); err != nil {
			b.Fatal(err)
		}
	}
}
