package bench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUTimes is CPU time consumed by a process.
type CPUTimes struct {
	User, System time.Duration
}

// Total is user plus system time.
func (c CPUTimes) Total() time.Duration { return c.User + c.System }

// Sub returns c − o.
func (c CPUTimes) Sub(o CPUTimes) CPUTimes {
	return CPUTimes{User: c.User - o.User, System: c.System - o.System}
}

// SelfCPU returns the CPU time this process has used so far, from
// getrusage(RUSAGE_SELF). It returns zero times if the call fails.
func SelfCPU() CPUTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return CPUTimes{}
	}
	return CPUTimes{
		User:   time.Duration(ru.Utime.Nano()),
		System: time.Duration(ru.Stime.Nano()),
	}
}

// CPUShare is CPU time used over a wall-clock window.
type CPUShare struct {
	UserSeconds   float64 `json:"user_s"`
	SystemSeconds float64 `json:"system_s"`
	// Cores is CPU seconds per wall second: 1.0 is one core kept busy.
	Cores float64 `json:"cores"`
	// OfMachine is Cores divided by the machine's logical CPUs (0..1).
	OfMachine float64 `json:"of_machine"`
	// CPUs is the number of logical CPUs the share is relative to.
	CPUs int `json:"cpus"`
}

// ShareOf computes the CPU share of used over wall on this machine.
func ShareOf(used CPUTimes, wall time.Duration) CPUShare {
	s := CPUShare{
		UserSeconds:   used.User.Seconds(),
		SystemSeconds: used.System.Seconds(),
		CPUs:          runtime.NumCPU(),
	}
	if wall > 0 {
		s.Cores = used.Total().Seconds() / wall.Seconds()
		s.OfMachine = s.Cores / float64(s.CPUs)
	}
	return s
}

// clockTicks is USER_HZ, the unit of the CPU times in /proc/PID/stat: 100
// on every mainstream Linux architecture (the kernel's ABI fixes it).
const clockTicks = 100

// ProcCPU returns the CPU time process pid has used so far, read from
// /proc/PID/stat (Linux only), with a resolution of 10 ms.
func ProcCPU(pid int) (CPUTimes, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return CPUTimes{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields from the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return CPUTimes{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return CPUTimes{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return CPUTimes{}, fmt.Errorf("/proc/%d/stat: bad utime/stime %q %q", pid, f[11], f[12])
	}
	tick := time.Second / clockTicks
	return CPUTimes{User: time.Duration(ut) * tick, System: time.Duration(st) * tick}, nil
}

// ProcessCPU is the CPU a watched process used over a run's window.
type ProcessCPU struct {
	PID int `json:"pid"`
	// Cores is CPU seconds per wall second.
	Cores float64 `json:"cores"`
	// MicrosPerOp is CPU microseconds per successful operation.
	MicrosPerOp float64 `json:"us_per_op"`
}

// MachineCPU returns the CPU time every process of the machine has used
// since boot, read from the first line of /proc/stat (Linux only): user,
// nice, system, irq, softirq and steal time as User and System (System
// the kernel's part), idle and iowait left out.
func MachineCPU() (CPUTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return CPUTimes{}, fmt.Errorf("/proc/stat: first line %q", line)
	}
	var v [8]int64 // user nice system idle iowait irq softirq steal
	for i := range v {
		if v[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return CPUTimes{}, fmt.Errorf("/proc/stat: %q: %v", f[i+1], err)
		}
	}
	tick := time.Second / clockTicks
	return CPUTimes{User: time.Duration(v[0]+v[1]) * tick, System: time.Duration(v[2]+v[5]+v[6]+v[7]) * tick}, nil
}
