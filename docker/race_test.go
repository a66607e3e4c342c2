//go:build race

package docker

// raceEnabled: this test binary was built with -race, so the binary the
// tests run is too (its packages then come from the same build cache).
const raceEnabled = true
