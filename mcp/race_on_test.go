//go:build race

package mcp_test

// raceEnabled reports a build with the race detector, whose
// instrumentation makes stack frames larger.
const raceEnabled = true
