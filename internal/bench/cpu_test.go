package bench

import (
	"os"
	"testing"
	"time"
)

func TestShareOf(t *testing.T) {
	s := ShareOf(CPUTimes{User: 1500 * time.Millisecond, System: 500 * time.Millisecond}, 4*time.Second)
	if s.Cores != 0.5 || s.UserSeconds != 1.5 || s.SystemSeconds != 0.5 {
		t.Fatalf("got %+v, want 0.5 cores", s)
	}
	if s.CPUs <= 0 || s.OfMachine != s.Cores/float64(s.CPUs) {
		t.Fatalf("of machine = %v with %d CPUs", s.OfMachine, s.CPUs)
	}
	if got := ShareOf(CPUTimes{User: time.Second}, 0); got.Cores != 0 {
		t.Fatalf("zero wall: cores = %v, want 0", got.Cores)
	}
}

func TestSelfCPUAdvances(t *testing.T) {
	before := SelfCPU()
	deadline := time.Now().Add(50 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	used := SelfCPU().Sub(before)
	if used.Total() <= 0 {
		t.Fatalf("50ms of busy loop used %v CPU (x=%d)", used.Total(), x)
	}
}

// burn uses 100ms of CPU (not of wall time: the machine may be busy;
// at most 10 s of it) and returns what getrusage counted.
func burn() time.Duration {
	self0 := SelfCPU()
	deadline := time.Now().Add(10 * time.Second)
	for SelfCPU().Sub(self0).Total() < 100*time.Millisecond && time.Now().Before(deadline) {
	}
	return SelfCPU().Sub(self0).Total()
}

func TestProcCPU(t *testing.T) {
	before, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	self := burn()
	after, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// /proc counts in 10ms ticks.
	if got := after.Sub(before).Total(); got < self-30*time.Millisecond || got > self+30*time.Millisecond {
		t.Fatalf("/proc says %v of CPU, getrusage %v", got, self)
	}
	if _, err := ProcCPU(-1); err == nil {
		t.Fatalf("ProcCPU(-1): no error")
	}
}

func TestMachineCPUCountsThisProcess(t *testing.T) {
	before, err := MachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	self := burn()
	after, err := MachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	// The machine used at least what this process did (less a tick of
	// rounding on each side).
	if got := after.Sub(before).Total(); got < self-20*time.Millisecond {
		t.Fatalf("/proc/stat says the machine used %v of CPU, this process alone %v", got, self)
	}
}
