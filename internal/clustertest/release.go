package clustertest

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync"
)

// Nodes of another release (Options.Binary, Node.RestartWith: an upgrade
// or a downgrade under test) get the flags of the cluster's nodes less
// those their binary does not know: a flag added since that release is
// left out, and the node runs with that setting's earlier behaviour.

var (
	flagsMu    sync.Mutex
	flagsCache = map[string]map[string]bool{}
	// helpFlag is a flag line of cmd/server's --help: "  --name" or
	// "  --name value".
	helpFlag = regexp.MustCompile(`(?m)^  --([a-z0-9-]+)( value)?$`)
)

// KnownFlags returns the flags a cmd/server binary lists in its --help,
// by name (without dashes).
func KnownFlags(bin string) (map[string]bool, error) {
	flagsMu.Lock()
	defer flagsMu.Unlock()
	if f, ok := flagsCache[bin]; ok {
		return f, nil
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s --help: %v\n%s", bin, err, out)
	}
	known := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		known[m[1]] = true
	}
	if len(known) == 0 {
		return nil, fmt.Errorf("%s --help lists no flag:\n%s", bin, out)
	}
	flagsCache[bin] = known
	return known, nil
}

// onlyFlags returns args without the flags known does not hold, each
// with its value: the next argument when it does not start with "-" (as
// every flag of the nodes is given: "--name value"), or after "=".
func onlyFlags(args []string, known map[string]bool) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || known[name] {
			out = append(out, a)
			continue
		}
		if !inline && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++ // its value
		}
	}
	return out
}
