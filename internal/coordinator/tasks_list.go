package coordinator

import (
	"context"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// listTasks returns a page of the tasks of owner counted under ownerKey
// (see cluster.TaskStore.List), each reaped when its runner is gone (see
// reapTask), so a listed task is never stuck in working on a dead node.
func (n *Node) listTasks(ctx context.Context, ownerKey, owner, cursor string, limit int) ([]cluster.Task, string, error) {
	recs, next, err := n.be.Tasks.List(ctx, ownerKey, owner, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	for i, t := range recs {
		if recs[i], err = n.reapTask(ctx, t); err != nil {
			return nil, "", err
		}
	}
	return recs, next, nil
}
