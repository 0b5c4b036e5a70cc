package coordinator

import (
	"context"
	"testing"
)

// A fan-out that finds a free slot holds it at once: changes made one
// after another while slots are free are never coalesced, whenever
// their goroutines run. Only one that really waits covers a later one.
func TestFanOutLimiterCoalescesOnlyWaiting(t *testing.T) {
	l := newFanOutLimiter(2, 8)
	for i := range 2 {
		if start, running := l.enter("notifications/resources/updated", "demo://x"); !start || !running {
			t.Fatalf("change %d with a free slot: start %v, running %v; want both", i, start, running)
		}
	}
	start, running := l.enter("notifications/resources/updated", "demo://x")
	if !start || running {
		t.Fatalf("third change, slots full: start %v, running %v; want to start and wait", start, running)
	}
	if start, _ := l.enter("notifications/resources/updated", "demo://x"); start {
		t.Fatal("a fourth change while the third waits was not coalesced into it")
	}
	if start, running := l.enter("notifications/resources/updated", "demo://y"); !start || running {
		t.Fatalf("another uri, slots full: start %v, running %v; want to start and wait", start, running)
	}
	l.release()
	if !l.acquire(context.Background(), "notifications/resources/updated", "demo://x") {
		t.Fatal("the waiting fan-out did not get the freed slot")
	}
	if start, _ := l.enter("notifications/resources/updated", "demo://x"); !start {
		t.Fatal("a change after the waiting one took its slot was dropped")
	}
}
