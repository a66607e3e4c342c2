package server

import (
	"runtime"
	"runtime/debug"
)

// version is the release version, set at link time:
//
//	-ldflags "-X github.com/yesguard/yesguard/server.version=v1.2.3"
//
// Without it the module version from the build info is used.
var version string

// BuildInfo identifies the running binary.
type BuildInfo struct {
	// Version is the release version, or the module's ("(devel)" when
	// built from a checkout).
	Version string
	// Revision is the VCS revision, "unknown" when the build did not
	// stamp one; "-dirty" marks uncommitted changes.
	Revision string
	// GoVersion is the Go toolchain that built it.
	GoVersion string
}

// ReadBuildInfo reads the binary's build information.
func ReadBuildInfo() BuildInfo {
	bi := BuildInfo{Version: version, GoVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if bi.Version == "" {
			bi.Version = info.Main.Version
		}
		if info.GoVersion != "" {
			bi.GoVersion = info.GoVersion
		}
		dirty := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				bi.Revision = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if bi.Revision != "" && dirty {
			bi.Revision += "-dirty"
		}
	}
	if bi.Version == "" {
		bi.Version = "(devel)"
	}
	if bi.Revision == "" {
		bi.Revision = "unknown"
	}
	return bi
}
