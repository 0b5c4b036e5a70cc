package appendcost

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Command reproduces a measurement.
const Command = "cd bench && go run ./cmd/appendcost"

// Cell returns the figures of the variant named name in mode.
func (r *Result) Cell(mode, name string) (Cell, bool) {
	mi := slices.Index(r.Modes, mode)
	if mi < 0 || mi >= len(r.Cells) {
		return Cell{}, false
	}
	for vi, v := range r.Variants {
		if v.Name == name && vi < len(r.Cells[mi]) && r.Cells[mi][vi].Calls > 0 {
			return r.Cells[mi][vi], true
		}
	}
	return Cell{}, false
}

// WriteTables writes the variants' table (Redis CPU per call in each
// mode from /proc/PID/stat, its ratio to the script as is, and the
// EVALSHA's own time from INFO commandstats) and the per-command
// breakdown of the script as is.
func (r *Result) WriteTables(w io.Writer) {
	p := func(f string, a ...any) { fmt.Fprintf(w, f, a...) }
	p("| variant | what | ")
	for _, m := range r.Modes {
		p("%s | ", m)
	}
	p("\n|---|---|")
	for range r.Modes {
		p("---:|")
	}
	p("\n")
	for _, v := range r.Variants {
		p("| %s | %s | ", v.Name, v.What)
		for _, m := range r.Modes {
			c, ok := r.Cell(m, v.Name)
			if !ok {
				p("— | ")
				continue
			}
			ratio := ""
			if base, ok := r.Cell(m, "as is"); ok && base.ProcUs > 0 && v.Name != "as is" {
				ratio = fmt.Sprintf(", %.2f×", c.ProcUs/base.ProcUs)
			}
			p("%.1f%s (script %.1f) | ", c.ProcUs, ratio, c.ScriptUs)
		}
		p("\n")
	}
	p("\nThe script as is, per appended event: what Redis ran (INFO commandstats: calls per event, µs per call), the requests it read (INFO stats `total_reads_processed`) and its CPU outside the EVALSHA (the /proc figure less the EVALSHA's own time: reading, parsing, replying, waiting in epoll).\n\n")
	p("| mode | Redis CPU µs/event | main thread µs/event | EVALSHA's own µs | outside the script µs | requests read/event | commands per event (µs per call) |\n|---|---:|---:|---:|---:|---:|---|\n")
	for _, m := range r.Modes {
		c, ok := r.Cell(m, "as is")
		if !ok {
			continue
		}
		p("| %s | %.1f | %.1f | %.1f | %.1f | %.2f | %s |\n", m, c.ProcUs, c.MainUs, c.ScriptUs, c.ProcUs-c.ScriptUs, c.Reads, c.commands())
	}
}

// CommandsUs is the time per call of the commands other than the
// EVALSHA: those its script ran.
func (c Cell) CommandsUs() float64 {
	var us float64
	for n, cc := range c.Commands {
		if n != "EVALSHA" {
			us += cc.Calls * cc.UsecPC
		}
	}
	return us
}

// commands lists the commands per call, most frequent first.
func (c Cell) commands() string {
	names := make([]string, 0, len(c.Commands))
	for n := range c.Commands {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if d := c.Commands[b].Calls - c.Commands[a].Calls; d != 0 {
			if d > 0 {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(names))
	for _, n := range names {
		cc := c.Commands[n]
		parts = append(parts, fmt.Sprintf("%s %.2f (%.2f)", n, cc.Calls, cc.UsecPC))
	}
	return strings.Join(parts, ", ")
}
