// Command yesguard runs the guard (serve, the default) and the tools around
// it. serve only parses flags into a server.Config and runs package server;
// say, check, complete, redeem, decisions and probe talk to a running
// guard over its public contract only (NATS and gRPC), as a pipeline, a
// backend or a buyer would; test (package policytest) and replay (package
// replay) judge in process, through the engine, with no guard running.
//
// Exit codes: 0 success, 1 runtime error (for probe: a probe failed; for
// decisions: none found; for test: a test failed; for replay: a decision
// changed; for redeem: the approval was refused), 2 bad flags or config.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// envPrefix prefixes the environment variable of every flag:
// --grpc-addr is YESGUARD_GRPC_ADDR.
const envPrefix = "YESGUARD_"

// defaultCommand runs when the first argument is a flag or absent, so that
// `yesguard` and `yesguard --grpc-addr ...` start the guard.
const defaultCommand = "serve"

// command is one subcommand. To add one, add an entry to commands.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, e *env) int
}

var commands = map[string]command{
	"serve":       {"run the guard (the default)", runServe},
	"healthcheck": {"exit 0 when the gRPC health service at --grpc-addr says SERVING, else 1", runHealthcheck},
	"version":     {"print the version", runVersion},
	"say":         {"publish a transcript event: say <call> <caller|agent> <text>", runSay},
	"check":       {"ask the guard about a tool call and print the decision: check <call> <tool> ['<json args>']", runCheck},
	"complete":    {"report an allowed call's result: complete <decision_id> ['<json result>'] (or --approval <approval>)", runComplete},
	"redeem":      {"redeem an ALLOW's approval as a backend does before it acts: redeem <approval> ['<json args>']; exit 1 if refused", runRedeem},
	"decisions":   {"print a call's evidence and refusal log: decisions <call>", runDecisions},
	"probe":       {"run the buyer's probes against a running guard; exit 1 if one fails", runProbe},
	"token":       {"make a gRPC bearer token and its entry for --grpc-tokens (token hash: an existing token's)", runToken},
	"replay":      {"re-judge recorded calls under the current policy beside the recorded decisions: replay FILE | --call ID", runReplay},
	"prompt":      {"print what to put in the model's instructions for each tool: prompt [--tool T] [--lang L]", runPrompt},
	"test":        {"run dialogue tests (YAML) against a policy in process; exit 1 if one fails: test [FILES]", runTest},
}

// env is what a command may use of the process, so that tests can give
// their own.
type env struct {
	stdout, stderr io.Writer
	lookupEnv      func(string) (string, bool)
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	return runEnv(context.Background(), args, &env{stdout: stdout, stderr: stderr, lookupEnv: os.LookupEnv})
}

func runEnv(ctx context.Context, args []string, e *env) int {
	name, rest := defaultCommand, args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, rest = args[0], args[1:]
	}
	if name == "help" {
		usage(e.stdout)
		return exitOK
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(e.stderr, "yesguard: unknown command %q\n\n", name)
		usage(e.stderr)
		return exitUsage
	}
	return cmd.run(ctx, rest, e)
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: yesguard [command] [flags]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-12s %s\n", name, commands[name].summary)
	}
	fmt.Fprintf(w, "\nRun 'yesguard <command> -h' for a command's flags. Every flag of serve can also be\n"+
		"set with an environment variable, %s<FLAG> (--grpc-addr is %sGRPC_ADDR); the flag wins.\n"+
		"say, check, complete, redeem, decisions and probe read the same variables for --grpc-addr, --nats-url and\n"+
		"--subject-prefix, so they find the guard that serve started.\n", envPrefix, envPrefix)
}

// newFlagSet returns a flag set that reports errors to e.stderr, for the
// caller to turn into exitUsage.
func newFlagSet(name string, e *env) *flag.FlagSet {
	fs := flag.NewFlagSet("yesguard "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs
}

// envName is the environment variable of a flag: grpc-addr gives
// YESGUARD_GRPC_ADDR.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// bindEnv names each flag's variable in its usage; applyEnv reads them.
func bindEnv(fs *flag.FlagSet, names ...string) {
	for _, name := range names {
		f := fs.Lookup(name)
		f.Usage += " (env " + envName(name) + ")"
	}
}

// flagNames lists every flag registered on fs.
func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// applyEnv sets each of names that the command line did not set from its
// environment variable, when that is set (even to ""), so a flag wins over
// its variable.
func applyEnv(fs *flag.FlagSet, lookupEnv func(string) (string, bool), names ...string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range names {
		if set[name] {
			continue
		}
		key := envName(name)
		v, ok := lookupEnv(key)
		if !ok {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("%s=%q: %w", key, v, err)
		}
	}
	return nil
}
