//go:build !race

package docker

// raceEnabled: this test binary was built without -race.
const raceEnabled = false
