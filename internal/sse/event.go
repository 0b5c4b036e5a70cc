// Package sse implements Server-Sent Events framing: writing events and
// comments, the deployment-unique event ids used for resumption, and a
// Reader that parses an event stream the way a browser EventSource does.
package sse

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Event is one Server-Sent Event.
type Event struct {
	// ID is sent as the "id:" field when non-empty. It becomes the client's
	// Last-Event-ID. It must not contain CR, LF or NUL.
	ID string
	// Name is sent as the "event:" field when non-empty. Clients treat an
	// absent name as "message". It must not contain CR or LF.
	Name string
	// Data is the payload. Each of its lines (split on "\n", "\r\n" or "\r")
	// becomes one "data:" field; empty Data still produces one empty
	// "data:" field so that the event is dispatched by the client.
	Data []byte
	// Retry, when positive, is sent as the "retry:" field in whole
	// milliseconds (truncated). It tells the client how long to wait
	// before reconnecting.
	Retry time.Duration
}

// Validate reports whether the event can be framed without corrupting the
// stream: the id must not contain CR, LF or NUL, the name must not contain
// CR or LF, and Retry must not be negative.
func (ev Event) Validate() error {
	if i := strings.IndexAny(ev.ID, "\r\n\x00"); i >= 0 {
		return fmt.Errorf("sse: event id contains %q at offset %d", ev.ID[i], i)
	}
	if i := strings.IndexAny(ev.Name, "\r\n"); i >= 0 {
		return fmt.Errorf("sse: event name contains %q at offset %d", ev.Name[i], i)
	}
	if ev.Retry < 0 {
		return errors.New("sse: negative retry")
	}
	return nil
}

// Write writes ev to w as a complete event, terminated by a blank line.
// It validates ev first (see Event.Validate) and writes nothing if the
// event is invalid. Write issues a single Write call on w.
func Write(w io.Writer, ev Event) error {
	if err := ev.Validate(); err != nil {
		return err
	}
	// Most events are small; a stack-sized buffer avoids a heap allocation
	// when the writer does not retain the slice.
	var scratch [512]byte
	_, err := w.Write(AppendEvent(scratch[:0], ev))
	return err
}

// WriteComment writes a comment line followed by a blank line, the usual
// keep-alive. Line breaks in text are folded into separate comment lines
// so the comment cannot inject fields.
func WriteComment(w io.Writer, text string) error {
	_, err := w.Write(AppendComment(make([]byte, 0, len(text)+4), text))
	return err
}

// AppendComment appends the wire form of the comment WriteComment writes
// to dst and returns the extended slice.
func AppendComment(dst []byte, text string) []byte {
	return append(appendLines(dst, ":", text, true), '\n')
}

// AppendEvent appends the wire form of ev to dst and returns the extended
// slice. It is the allocation-free core of Write. AppendEvent does not
// fail: callers that have not validated ev get a well-formed event in
// which CR, LF and NUL are removed from the id, CR and LF are removed from
// the name, and a negative Retry is omitted.
func AppendEvent(dst []byte, ev Event) []byte {
	if ev.ID != "" {
		dst = append(dst, "id: "...)
		dst = appendClean(dst, ev.ID, "\r\n\x00")
		dst = append(dst, '\n')
	}
	if ev.Name != "" {
		dst = append(dst, "event: "...)
		dst = appendClean(dst, ev.Name, "\r\n")
		dst = append(dst, '\n')
	}
	if ev.Retry > 0 {
		dst = append(dst, "retry: "...)
		dst = strconv.AppendInt(dst, ev.Retry.Milliseconds(), 10)
		dst = append(dst, '\n')
	}
	dst = appendLines(dst, "data:", ev.Data, false)
	return append(dst, '\n')
}

// appendClean appends s without any byte in drop.
func appendClean(dst []byte, s, drop string) []byte {
	for {
		i := strings.IndexAny(s, drop)
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i]...)
		s = s[i+1:]
	}
}

// appendLines appends one "prefix line\n" field per line of text, where
// lines end at "\n", "\r\n" or "\r". A space separates prefix and line
// (always for data, so that the value round-trips even when it starts
// with a space; only before non-empty lines for comments). Empty text
// yields one field.
func appendLines[T string | []byte](dst []byte, prefix string, text T, commentStyle bool) []byte {
	for {
		end, next := len(text), len(text)
		for i := 0; i < len(text); i++ {
			if c := text[i]; c == '\n' || c == '\r' {
				end, next = i, i+1
				if c == '\r' && i+1 < len(text) && text[i+1] == '\n' {
					next = i + 2
				}
				break
			}
		}
		dst = append(dst, prefix...)
		if !commentStyle || end > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, text[:end]...)
		dst = append(dst, '\n')
		if next == len(text) && end == len(text) {
			return dst
		}
		text = text[next:]
	}
}
