package server

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	var c Config
	c.SetDefaults()
	if c.GRPCAddr != DefaultGRPCAddr || c.NATSListen != DefaultNATSListen ||
		c.SubjectPrefix != DefaultSubjectPrefix || c.DecisionLog != DefaultDecisionLog ||
		c.LogLevel != DefaultLogLevel || c.ShutdownTimeout != DefaultShutdownTimeout {
		t.Errorf("SetDefaults left %+v", c)
	}
	if c.HTTPAddr != "" {
		t.Errorf("SetDefaults set HTTPAddr %q; empty must stay empty (disabled)", c.HTTPAddr)
	}
	if c.Limits.MaxTextBytes == 0 || c.Limits.IdleTTL == 0 {
		t.Errorf("SetDefaults left the limits unset: %+v", c.Limits)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	if d := DefaultConfig(); d.HTTPAddr != DefaultHTTPAddr {
		t.Errorf("DefaultConfig().HTTPAddr = %q, want %q", d.HTTPAddr, DefaultHTTPAddr)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*Config)
		wantErr []string // substrings; none means valid
	}{
		{name: "defaults", mutate: func(*Config) {}},
		{name: "random ports", mutate: func(c *Config) {
			c.GRPCAddr, c.HTTPAddr, c.NATSListen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:-1"
		}},
		{name: "all interfaces", mutate: func(c *Config) { c.GRPCAddr, c.NATSListen, c.GRPCTokens = ":50051", "[::]:4222", "tokens.yaml" }},
		// Red team F0b: gRPC or the pages beyond the loopback need tokens,
		// or a flag that says the operator knows.
		{name: "grpc open to the network", mutate: func(c *Config) { c.GRPCAddr = "0.0.0.0:50051" },
			wantErr: []string{"grpc_addr: 0.0.0.0:50051 is not a loopback address", "--grpc-tokens", "--insecure-no-auth"}},
		{name: "pages open to the network", mutate: func(c *Config) { c.HTTPAddr = "[::]:9090" },
			wantErr: []string{"http_addr: [::]:9090 is not a loopback address", "--insecure-no-auth"}},
		{name: "open, knowingly", mutate: func(c *Config) { c.GRPCAddr, c.HTTPAddr, c.InsecureNoAuth = ":50051", "0.0.0.0:9090", true }},
		{name: "localhost without tokens", mutate: func(c *Config) { c.GRPCAddr, c.HTTPAddr = "localhost:50051", "[::1]:9090" }},
		{name: "http disabled", mutate: func(c *Config) { c.HTTPAddr = "" }},
		{name: "external nats", mutate: func(c *Config) {
			c.NATSURL = "nats://a:4222, tls://b:4222,c:4222"
			c.NATSListen = "ignored"
		}},
		{name: "nested prefix", mutate: func(c *Config) { c.SubjectPrefix = "acme.voice-1.transcript" }},
		{name: "several at once", mutate: func(c *Config) {
			c.GRPCAddr = "localhost"
			c.HTTPAddr = "127.0.0.1:99999"
			c.NATSListen = "127.0.0.1:x"
			c.SubjectPrefix = "yesguard.*"
			c.LogLevel = "loud"
			c.ShutdownTimeout = -time.Second
			c.Limits.MaxCalls = -1
		}, wantErr: []string{"grpc_addr:", "http_addr:", "nats_listen:", "subject_prefix:", "log_level:", "shutdown_timeout:", "limits.max_calls:"}},
		{name: "bad nats url", mutate: func(c *Config) { c.NATSURL = "http://a:4222,,nats://" },
			wantErr: []string{`nats_url: "http://a:4222": scheme "http"`, "empty URL", `"nats://": no host`}},
		{name: "prefix trailing dot", mutate: func(c *Config) { c.SubjectPrefix = "yesguard." }, wantErr: []string{"subject_prefix: \"yesguard.\" has an empty token"}},
		{name: "prefix full wildcard", mutate: func(c *Config) { c.SubjectPrefix = "a.>" }, wantErr: []string{"wildcard"}},
		{name: "prefix space", mutate: func(c *Config) { c.SubjectPrefix = "a b" }, wantErr: []string{"white space"}},
		{name: "empty decision log", mutate: func(c *Config) { c.DecisionLog = " " }, wantErr: []string{"decision_log:"}},
		{name: "negative nats port", mutate: func(c *Config) { c.GRPCAddr = "127.0.0.1:-1" }, wantErr: []string{"grpc_addr:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mutate(&c)
			err := c.Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate passed")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q:\n%v", want, err)
				}
			}
		})
	}
}
