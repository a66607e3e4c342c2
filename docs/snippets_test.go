// Package docs holds the tests of the guides themselves. The Python
// integration code the guides show is the yesguard package's
// (clients/python), which its own ci.sh tests against a real guard.
package docs

import (
	"os"
	"strings"
	"testing"
)

// The README's table of common stacks names Pipecat's frames as Pipecat
// has them now: StartInterruptionFrame was removed in Pipecat 1.0.
func TestReadmeNamesCurrentPipecatFrames(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "| agent `interrupted: true` |") {
			continue
		}
		found = true
		if !strings.Contains(strings.Split(line, "|")[2], "`InterruptionFrame`") {
			t.Errorf("the README maps Pipecat's interruptions to something else than InterruptionFrame: %s", line)
		}
	}
	if !found {
		t.Error("the README's table of common stacks has no row for an agent's interruption")
	}
}
