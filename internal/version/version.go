// Package version reports which build of scalechat is running.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at link time with
// -ldflags "-X github.com/scalechat/scalechat/internal/version.version=v1.2.3".
var version = "dev"

// Version returns the release version, or "dev" for a local build.
func Version() string { return version }

// String describes the build in one line: version, commit and Go version.
func String() string {
	commit := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				commit = s.Value[:12]
			}
		}
	}
	return fmt.Sprintf("scalechat %s (commit %s, %s, %s/%s)", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
