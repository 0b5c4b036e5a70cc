package coordinator

import "context"

// The enabled state of features (tools, prompts, resources switched on
// or off at run time) is cluster state: it lives in the backend's
// Registry, a change is announced with RegistryChanged, and every node
// reloads it on that message, after a bus reconnect and on every
// heartbeat (Config.Refresh), so a lost message delays a node by one
// heartbeat at most. The backend decides atomically whether a call
// changed the state, so each change is announced once, by the node whose
// call made it, whatever the other nodes last saw.

// swapFeature records the enabled state of feature key (unset is its
// state while nothing is recorded) and returns the state before; when it
// changed, it tells every node.
func (n *Node) swapFeature(ctx context.Context, key string, on, unset bool) (was bool, err error) {
	was, err = n.be.Registry.Swap(ctx, key, on, unset)
	if err != nil {
		return false, err
	}
	if was != on {
		n.featureChanged(ctx)
	}
	return was, nil
}

// toggleFeature flips the enabled state of feature key (from unset while
// nothing is recorded), tells every node, and returns the new state.
func (n *Node) toggleFeature(ctx context.Context, key string, unset bool) (on bool, err error) {
	on, err = n.be.Registry.Toggle(ctx, key, unset)
	if err != nil {
		return false, err
	}
	n.featureChanged(ctx)
	return on, nil
}

// featureChanged tells every node to reload the enabled state.
func (n *Node) featureChanged(ctx context.Context) {
	if err := n.Publish(ctx, RegistryChanged{}); err != nil {
		n.log.Warn().Err(err).Msg("feature change not broadcast; nodes see it at their next heartbeat")
	}
}

// Features is the enabled state of features, as the node reads and
// changes it.
type Features struct{ n *Node }

// Swap records the enabled state of feature key (unset is its state
// while nothing is recorded) and returns the state before; when it
// changed, it tells every node.
func (f *Features) Swap(ctx context.Context, key string, on, unset bool) (was bool, err error) {
	return f.n.swapFeature(ctx, key, on, unset)
}

// Toggle flips the enabled state of feature key (from unset while
// nothing is recorded), tells every node, and returns the new state.
func (f *Features) Toggle(ctx context.Context, key string, unset bool) (on bool, err error) {
	return f.n.toggleFeature(ctx, key, unset)
}

// All returns the enabled state of every feature recorded.
func (f *Features) All(ctx context.Context) (map[string]bool, error) {
	return f.n.be.Registry.All(ctx)
}
