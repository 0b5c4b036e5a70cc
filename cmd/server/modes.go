package main

import (
	"runtime/debug"
	"strings"
)

// modeArgs recognises the command lines that do something else than run
// a node: --version, and --healthcheck URL (or --healthcheck=URL). Both
// accept one dash as well, like every flag.
func modeArgs(args []string) (mode, arg string, ok bool) {
	if len(args) == 0 {
		return "", "", false
	}
	name, val, hasVal := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(args[0], "-"), "-"), "=")
	if !strings.HasPrefix(args[0], "-") {
		return "", "", false
	}
	switch {
	case name == "version" && len(args) == 1 && !hasVal:
		return "version", "", true
	case name == "healthcheck" && hasVal && len(args) == 1:
		return "healthcheck", val, true
	case name == "healthcheck" && !hasVal && len(args) == 2:
		return "healthcheck", args[1], true
	}
	return "", "", false
}

// buildVersion is the version of this binary: the one set at build time
// (-ldflags "-X main.version=..."), else the module version the go
// command recorded (go install ...@v1.2.3), else "dev"; with the commit
// the binary was built from when the build recorded it.
func buildVersion() string {
	v := version
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" && !strings.Contains(v, rev[:min(len(rev), 12)]) {
		v += " (" + rev[:min(len(rev), 12)] + dirty + ")"
	}
	return v
}
