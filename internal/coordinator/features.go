package coordinator

import "context"

// The enabled state of features (tools, prompts, resources switched on
// or off at run time) is cluster state: it lives in the backend's
// Registry, a change is announced with RegistryChanged, and every node
// reloads it on that message, after a bus reconnect and on every
// heartbeat (Config.Refresh), so a lost message delays a node by one
// heartbeat at most.

// SetFeature records the enabled state of feature key and, when it
// changed, tells every node.
func (n *Node) SetFeature(ctx context.Context, key string, on bool) (bool, error) {
	changed, err := n.be.Registry.Set(ctx, key, on)
	if err != nil {
		return false, err
	}
	if changed {
		if err := n.Publish(ctx, RegistryChanged{}); err != nil {
			n.log.Warn().Err(err).Msg("feature change not broadcast; nodes see it at their next heartbeat")
		}
	}
	return changed, nil
}

// Features returns the enabled state of every feature recorded.
func (n *Node) Features(ctx context.Context) (map[string]bool, error) {
	return n.be.Registry.All(ctx)
}
