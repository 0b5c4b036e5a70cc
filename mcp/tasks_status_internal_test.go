package mcp

import (
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// The task statuses the protocol's answers tell apart are the ones the
// store records.
func TestTaskStatusesAreTheStoresOwn(t *testing.T) {
	for _, c := range []struct{ ours, store string }{
		{taskInputRequired, cluster.TaskInputRequired},
		{taskCompleted, cluster.TaskCompleted},
		{taskFailed, cluster.TaskFailed},
		{taskCancelled, cluster.TaskCancelled},
	} {
		if c.ours != c.store {
			t.Errorf("status %q here, %q in the store", c.ours, c.store)
		}
	}
}
