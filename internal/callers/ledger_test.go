package callers

import (
	"testing"
	"time"
)

// The longest a note waits to be debited grows with the live nodes, so
// that callers each node sees little of cost the deployment one debit per
// callerLinger, not one per node; a caller that keeps its pace is still
// debited by count.
func TestCallerLongestWaitGrowsWithNodes(t *testing.T) {
	c := &Ledger{}
	if got := c.longest(); got != callerLinger {
		t.Fatalf("longest with no node count: %v, want %v", got, callerLinger)
	}
	c.o.Nodes = func() int { return 8 }
	if got := c.longest(); got != 8*callerLinger {
		t.Fatalf("longest with 8 nodes: %v, want %v", got, 8*callerLinger)
	}
	if got := lingerFor(20, 0, c.longest()); got != 8*callerLinger {
		t.Fatalf("a caller with no pace waits %v, want the longest, %v", got, 8*callerLinger)
	}
	if got := lingerFor(20, 1000, c.longest()); got != 40*time.Millisecond {
		t.Fatalf("a caller noted 1000 a second waits %v, want 40ms (twice a threshold of 20)", got)
	}
	if got := lingerFor(20, 1, c.longest()); got != 8*callerLinger {
		t.Fatalf("a caller noted once a second waits %v, want the longest (%v)", got, 8*callerLinger)
	}
}
