package coordinator

// KnowsMember reports whether n counts instance among the live members.
func (n *Node) KnowsMember(instance string) bool { return n.members.has(instance) }
