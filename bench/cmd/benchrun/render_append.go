package main

import (
	"fmt"
	"strings"

	"github.com/mcpcluster/mcpcluster/bench/appendcost"
)

// What an event appended on its own costs Redis: the paced progress
// runs (each event its own append) and the append script replayed
// against a Redis of its own (bench/appendcost).

// pacedEvents is the appends of one paced progress call: its 10
// progress notifications, the demo tool's closing log message and the
// result, each appended on its own (counted with MONITOR on one call).
// The counted runs' windows see more appends per completed call (calls
// in flight at the window's edges), so their figures are divided by the
// appends (EVALSHA) they saw instead.
const pacedEvents = 12

// pacedFigures is what one event of a paced progress call cost on a
// target.
type pacedFigures struct {
	events            float64 // appends per call
	evalsha           float64 // EVALSHA per completed call in the counted run
	redisUs, nodeUs   float64 // CPU per event
	commands, rtts    float64 // per event
	reads             float64 // requests read by Redis per event
	byCommand         string  // round trips by command per call
	counted, measured bool
}

func pacedOn(res *suiteResult, key string) pacedFigures {
	var f pacedFigures
	f.events = pacedEvents
	if rep := rttRow(res, pacedScenario, legacy, key, ""); rep != nil && rep.Ops > 0 {
		for cmd, n := range rep.Redis.RoundTrips {
			if strings.EqualFold(cmd, "EVALSHA") {
				f.evalsha += n
			}
		}
		if f.evalsha >= 1 {
			f.counted = true
			f.rtts = rep.Redis.RoundTripsPerOp / f.evalsha
			f.reads = rep.Redis.ReadsPerOp / f.evalsha
			f.commands = rep.Redis.CommandsPerOp / f.evalsha
			f.byCommand = perOpList(rep.Redis.RoundTrips)
		}
	}
	if r, ok := mainRow(res, pacedScenario, legacy, key, ""); ok {
		if n, redis, ok := serverMicros(r.rep); ok && r.rep.Ops > 0 {
			f.measured = true
			f.nodeUs, f.redisUs = n/f.events, redis/f.events
		}
	}
	return f
}

// pacedGoal is the goal of an event appended on its own.
func pacedGoal(res *suiteResult) goal {
	g := goal{name: "Redis CPU per event appended on its own (progress, 10 events 20 ms apart), 1 node on Redis", target: "≤ 15 µs"}
	f := pacedOn(res, "redis")
	if !f.measured || f.redisUs <= 0 {
		return g
	}
	g.measured, g.met = true, f.redisUs <= 15
	g.today = fmt.Sprintf("%.0f µs per event (%.0f appends per call)", f.redisUs, f.events)
	var notes []string
	if f.counted {
		notes = append(notes, fmt.Sprintf("%.2f Redis round trips, %.1f commands and %.2f requests read per event (per completed call in the counted window: %s)", f.rtts, f.commands, f.reads, f.byCommand))
	}
	if ac := res.AppendCost; ac != nil && ac.Err == "" {
		one, ok1 := ac.Cell(appendcost.ModeOne, "as is")
		paced, ok2 := ac.Cell(appendcost.ModePaced, "as is")
		trivial, ok3 := ac.Cell(appendcost.ModePaced, "trivial script")
		if ok1 && ok2 && ok3 {
			notes = append(notes, fmt.Sprintf("replayed alone, the append costs Redis %.0f µs back to back (the script's own %.0f) but %.0f paced 20 ms apart (the script's own %.0f), and a script that only returns 1 costs %.0f paced: most of it is Redis woken for one lone request, not the script's commands", one.ProcUs, one.ScriptUs, paced.ProcUs, paced.ScriptUs, trivial.ProcUs))
		}
	}
	if l := pacedOn(res, lingerTarget); l.measured && l.redisUs > 0 {
		notes = append(notes, lingerNote(f, l))
	}
	notes = append(notes, "see [What an appended event costs Redis](#what-an-appended-event-costs-redis)")
	g.reason = joinNotes(notes...)
	return g
}

// lingerTarget is the configuration run with --redis-append-linger.
const lingerTarget = "redis-linger"

// lingerNote compares a paced event with --redis-append-linger (l) to
// the same node without it (f), measured side by side.
func lingerNote(f, l pacedFigures) string {
	s := fmt.Sprintf("with `--redis-append-linger 1ms`, %.0f µs (%.2f×)", l.redisUs, l.redisUs/f.redisUs)
	if l.counted && f.counted && f.reads > 0 {
		s += fmt.Sprintf(", %.2f requests read per event (%.2f×)", l.reads, l.reads/f.reads)
	}
	if f.nodeUs > 0 {
		s += fmt.Sprintf(", node CPU %.0f µs per event (%.2f×)", l.nodeUs, l.nodeUs/f.nodeUs)
	}
	return s
}

// bestBody is the lowest ratio to the script as is, back to back, of the
// variants that leave out a part of its body.
func bestBody(ac *appendcost.Result) float64 {
	best := 1.0
	base, ok := ac.Cell(appendcost.ModeOne, "as is")
	if !ok || base.ProcUs <= 0 {
		return best
	}
	for _, name := range []string{"no LRU touch", "no token string", "HSET of 2 fields"} {
		if c, ok := ac.Cell(appendcost.ModeOne, name); ok {
			best = min(best, c.ProcUs/base.ProcUs)
		}
	}
	return best
}

// cellOf formats v, or is "—" when not ok.
func cellOf(ok bool, format string, v float64) string {
	if !ok {
		return "—"
	}
	return fmt.Sprintf(format, v)
}

func renderAppendCost(b *strings.Builder, res *suiteResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	ac := res.AppendCost
	var rows []string
	for _, t := range res.Targets {
		if !pacedTarget(t) {
			continue
		}
		f := pacedOn(res, t.Key)
		if !f.measured && !f.counted {
			continue
		}
		cell := cellOf
		by := f.byCommand
		if by == "" {
			by = "—"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s |", t.Label, cellOf(f.counted, "%.2f", f.evalsha),
			cell(f.measured, "%.0f", f.redisUs), cell(f.counted, "%.1f", f.commands), cell(f.counted, "%.2f", f.rtts),
			cell(f.counted, "%.2f", f.reads), cell(f.measured, "%.0f", f.nodeUs), by))
	}
	if len(rows) == 0 && (ac == nil || ac.Err != "") {
		return
	}
	p("## What an appended event costs Redis\n\n")
	if res.PacedFrom != "" {
		p("Measured apart from the rest of the page: %s.\n\n", res.PacedFrom)
	}
	if len(rows) > 0 {
		p("*paced-progress* is the resume scenario's call neither cut nor resumed: `progress {steps: 10, delayMs: 20}` on 16 sessions, so that each of the call's %d events (10 notifications, the tool's closing log message and the result) is appended to the stream's history on its own, in one EVALSHA. Per event: Redis's CPU from `/proc` (as *+Redis* above) and the nodes' CPU, per call ÷ %d; the commands Redis executed (`INFO commandstats`), the round trips (MONITOR) and the requests it read (`INFO stats`) in the short counted run, ÷ the appends (EVALSHA) it saw, which are more than %d per completed call (calls in flight at the window's edges).\n\n", pacedEvents, pacedEvents, pacedEvents)
		p("| Configuration | EVALSHA per completed call (counted run) | Redis CPU µs/event | commands/event | round trips/event | requests read/event | node CPU µs/event | round trips by command per completed call |\n|---|---:|---:|---:|---:|---:|---:|---|\n")
		for _, r := range rows {
			p("%s\n", r)
		}
		p("\n")
	}
	if f, l := pacedOn(res, "redis"), pacedOn(res, lingerTarget); f.measured && l.measured && f.redisUs > 0 {
		p("`--redis-append-linger 1ms` lets a stream's notifications wait up to 1 ms for other writes to share their round trip (a server→client request or the final response never waits and ends the wait of those before it). Per paced event, side by side with the same node without it: %s.\n\n", lingerNote(f, l))
	}
	if ac == nil {
		return
	}
	if ac.Err != "" {
		p("The replay of the append script failed: `%s`.\n\n", oneLine(ac.Err))
		return
	}
	p("The append script replayed (`%s`, %s): `bench/appendcost` starts a `redis-server` of its own (%s) and sends it the backend's append script (`appendBatchScript`, loaded once, run by EVALSHA) with the keys and arguments `AppendBatch` sends for a progress call's POST stream (opened by its first append, ended by its 12th, a 130-byte notification each), and variants of the script with the same keys and arguments, each %s per round in %d rounds, the variants of a round one right after the other: back to back on one connection; from 16 connections at once; 16 streams' appends in one pipeline (what the batcher sends when 16 streams' appends wait together); one stream paced 20 ms apart; 16 streams each paced 20 ms apart (%s each). Figures are the round with the median CPU. Each cell is the redis-server's CPU per call in µs from `/proc/PID/stat`, its ratio to the script as is in the same mode, and (*script*) the EVALSHA's own time from `INFO commandstats`, the script's work inside Redis. With nothing sent, Redis's main thread used %.0f µs of CPU per second (its timers, `hz` 10).\n\n",
		appendcost.Command, ac.Started.Format("2006-01-02 15:04 UTC"), ac.Redis, ac.Options.Window, ac.Options.Rounds, ac.Options.Paced, ac.IdleUsPerSec)
	ac.WriteTables(b)
	p("\n")
	one, ok1 := ac.Cell(appendcost.ModeOne, "as is")
	pipe, ok2 := ac.Cell(appendcost.ModePipeline, "as is")
	paced, ok3 := ac.Cell(appendcost.ModePaced, "as is")
	trivialPaced, ok4 := ac.Cell(appendcost.ModePaced, "trivial script")
	trivialOne, ok5 := ac.Cell(appendcost.ModeOne, "trivial script")
	if ok1 && ok2 && ok3 && ok4 && ok5 {
		p("What the numbers support:\n\n")
		p("- *Back to back, the request around the script is %.0f%% of an append, and the commands are little of the script.* Of %.1f µs per append on one connection, the EVALSHA's own time is %.1f µs and %.1f µs go to reading, parsing and answering the request; of the script's %.1f µs, the commands it runs take %.1f µs (the breakdown's calls × µs per call), the rest is Lua around them. A script that only returns 1 with the same arguments costs %.1f µs; the variants without a part of the body save at most %.0f%%. In one pipeline of 16 streams the same script costs %.1f µs per append, %.2f× (%.2f requests read per append).\n",
			100*(one.ProcUs-one.ScriptUs)/one.ProcUs, one.ProcUs, one.ScriptUs, one.ProcUs-one.ScriptUs, one.ScriptUs, one.CommandsUs(), trivialOne.ProcUs, 100*(1-bestBody(ac)), pipe.ProcUs, pipe.ProcUs/one.ProcUs, pipe.Reads)
		p("- *Paced 20 ms apart, an append costs %.1f µs, %.1f× back to back*, and the same script's own time goes from %.1f to %.1f µs for the same commands (see the breakdown). A script that only returns 1 costs %.1f µs paced (%.2f× the append). Both include Redis's idle CPU, %.1f µs per event at 50 events per second.\n",
			paced.ProcUs, paced.ProcUs/one.ProcUs, one.ScriptUs, paced.ScriptUs, trivialPaced.ProcUs, trivialPaced.ProcUs/paced.ProcUs, ac.IdleUsPerSec/50)
		if f := pacedOn(res, "redis"); f.measured {
			if p16, ok := ac.Cell(appendcost.ModePaced16, "as is"); ok && p16.ProcUs >= 0.7*f.redisUs {
				p("- *On the node the append is the cost.* An event of the paced progress call (16 sessions) costs Redis %.0f µs on one node; the script replayed alone on 16 streams each paced 20 ms apart costs %.1f µs per append: the node's other traffic during the call (its round trips by command above) adds little.\n", f.redisUs, p16.ProcUs)
			}
		}
		if trivialPaced.ProcUs > 15 {
			p("- *No shorter script reaches 15 µs per event appended on its own*: a script that does nothing costs %.1f µs when it arrives alone. The lever is fewer requests per event — the appends of several streams, or several events, in one round trip, as the pipeline row shows (%.1f µs per append) — not the script body.\n", trivialPaced.ProcUs, pipe.ProcUs)
		}
	}
	p("\n")
}
