package patterns_test

import (
	"fmt"

	"github.com/yesguard/yesguard/patterns"
)

// The judge reads the values of the question the yes answers and meets
// them with the call's arguments: each bound argument must be stated, and
// no value may be stray.
func ExampleMatchArgs() {
	set, err := patterns.LoadEmbedded()
	if err != nil {
		panic(err)
	}
	l := set.Get("en-US")
	question := l.Parse("Your old bill was $64.00. Shall I pay the $71.25 on Tuesday, December 8 at 3 pm?").Sentences[1]
	vals := l.Values(question)
	var args []patterns.Arg
	for _, v := range []any{71.25, "2026-12-08T15:00:00"} { // as JSON gives them
		if a, ok := patterns.ParseArg(v); ok {
			args = append(args, a)
		}
	}
	for _, v := range vals {
		fmt.Println(v.Kind, v.Text)
	}
	m := patterns.MatchArgs(vals, args)
	fmt.Printf("stated %02b, stray %02b\n", m.Stated, m.Stray)
	// Output:
	// amount $71.25
	// datetime on tuesday, december 8 at 3 pm
	// stated 11, stray 00
}
