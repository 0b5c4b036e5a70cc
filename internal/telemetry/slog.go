package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"time"

	"github.com/rs/zerolog"
)

// The layers below mcp log with zerolog; a program may hand mcp a
// *slog.Logger instead. FromSlog turns it into the zerolog.Logger the
// layers use: each line is decoded and given to the slog handler as a
// record, with the line's fields as attributes in their order (a line
// the handler does not want at its level is not decoded). ToSlog goes
// the other way, for Request.Logger.

// FromSlog returns a zerolog.Logger that writes to h.
func FromSlog(h slog.Handler) zerolog.Logger {
	return zerolog.New(slogWriter{h}).Level(zerolog.DebugLevel).With().Timestamp().Logger()
}

type slogWriter struct{ h slog.Handler }

func (w slogWriter) Write(p []byte) (int, error) {
	return w.WriteLevel(zerolog.InfoLevel, p)
}

// WriteLevel decodes one zerolog line into a record of h.
func (w slogWriter) WriteLevel(level zerolog.Level, p []byte) (int, error) {
	lv := slogLevel(level)
	ctx := context.Background()
	if !w.h.Enabled(ctx, lv) {
		return len(p), nil
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return len(p), nil // not a zerolog line: nothing to say
	}
	var (
		msg   string
		at    = time.Now()
		attrs []slog.Attr
	)
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := t.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			break
		}
		switch key {
		case zerolog.MessageFieldName:
			msg, _ = v.(string)
		case zerolog.LevelFieldName:
		case zerolog.TimestampFieldName:
			if s, ok := v.(string); ok {
				if t, err := time.Parse(zerolog.TimeFieldFormat, s); err == nil {
					at = t
				}
			}
		default:
			attrs = append(attrs, slog.Any(key, plain(v)))
		}
	}
	r := slog.NewRecord(at, lv, msg, 0)
	r.AddAttrs(attrs...)
	_ = w.h.Handle(ctx, r)
	return len(p), nil
}

// plain turns a decoded number into an int64 or a float64.
func plain(v any) any {
	n, ok := v.(json.Number)
	if !ok {
		return v
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i
	}
	f, _ := n.Float64()
	return f
}

func slogLevel(l zerolog.Level) slog.Level {
	switch {
	case l <= zerolog.DebugLevel:
		return slog.LevelDebug
	case l == zerolog.InfoLevel, l == zerolog.NoLevel:
		return slog.LevelInfo
	case l == zerolog.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// ToSlog returns a *slog.Logger that writes to l.
func ToSlog(l zerolog.Logger) *slog.Logger { return slog.New(&zerologHandler{l: l}) }

type zerologHandler struct {
	l      zerolog.Logger
	prefix string // of the open groups, "a.b."
}

func (h *zerologHandler) Enabled(_ context.Context, lv slog.Level) bool {
	return h.l.GetLevel() <= zerologLevel(lv)
}

func (h *zerologHandler) Handle(_ context.Context, r slog.Record) error {
	e := h.l.WithLevel(zerologLevel(r.Level))
	if e == nil {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		e = addAttr(e, h.prefix, a)
		return true
	})
	e.Msg(r.Message)
	return nil
}

func (h *zerologHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := h.l.With()
	for _, a := range as {
		v := a.Value.Resolve().Any()
		if err, ok := v.(error); ok {
			c = c.AnErr(h.prefix+a.Key, err)
			continue
		}
		c = c.Interface(h.prefix+a.Key, v)
	}
	return &zerologHandler{l: c.Logger(), prefix: h.prefix}
}

func (h *zerologHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &zerologHandler{l: h.l, prefix: h.prefix + name + "."}
}

func addAttr(e *zerolog.Event, prefix string, a slog.Attr) *zerolog.Event {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			e = addAttr(e, prefix+a.Key+".", g)
		}
		return e
	}
	if a.Key == "" {
		return e
	}
	if err, ok := v.Any().(error); ok {
		return e.AnErr(prefix+a.Key, err)
	}
	return e.Interface(prefix+a.Key, v.Any())
}

func zerologLevel(lv slog.Level) zerolog.Level {
	switch {
	case lv < slog.LevelInfo:
		return zerolog.DebugLevel
	case lv < slog.LevelWarn:
		return zerolog.InfoLevel
	case lv < slog.LevelError:
		return zerolog.WarnLevel
	}
	return zerolog.ErrorLevel
}
