package main

import (
	"context"
	"fmt"

	"github.com/yesguard/yesguard/guard"
	"github.com/yesguard/yesguard/internal/ask"
)

// runPrompt prints what to put in the model's instructions for the
// policy's tools.
func runPrompt(_ context.Context, args []string, e *env) int {
	const name = "prompt"
	fs := newFlagSet(name, e)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: yesguard prompt [--policy FILE] [--tool T] [--lang L]\n\n"+
			"Prints what to put in the model's instructions for each tool of the policy: when to call it,\n"+
			"how to ask (the guard's own question, as the policy writes it) and what to do with each refusal.\n\n")
		fs.PrintDefaults()
	}
	policy := fs.String("policy", "", "policy `file` (empty: the built-in defaults)")
	tool := fs.String("tool", "", "only this `tool`")
	lang := fs.String("lang", "", "the question in this `language` only (empty: every language the tool has a question in)")
	if err := fs.Parse(args); err != nil {
		return usageError(name, flagError{err}, e)
	}
	if fs.NArg() > 0 {
		return usageError(name, fmt.Errorf("unexpected argument %q", fs.Arg(0)), e)
	}
	p, err := guard.LoadPolicy(*policy)
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard prompt: %v\n", err)
		return exitError
	}
	set, err := ask.Load()
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard prompt: %v\n", err)
		return exitError
	}
	out, err := guard.Prompt(p, set, *tool, *lang)
	if err != nil {
		fmt.Fprintf(e.stderr, "yesguard prompt: %v\n", err)
		return exitError
	}
	fmt.Fprint(e.stdout, out)
	return exitOK
}
