// Package logfilter narrows a structured logger to a minimum level. The
// libraries we embed (the MCP SDK, River) log routine events at info level
// — every stateless connect, every job fetch — which would drown the
// service's own lines; they get a logger that passes warnings and errors.
package logfilter

import (
	"context"
	"log/slog"
)

// AtLeast returns a logger that passes records of level min and above to
// l's handler; nil for a nil logger.
func AtLeast(l *slog.Logger, min slog.Level) *slog.Logger {
	if l == nil {
		return nil
	}
	return slog.New(handler{l.Handler(), min})
}

type handler struct {
	slog.Handler
	min slog.Level
}

func (h handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h handler) WithAttrs(a []slog.Attr) slog.Handler { return handler{h.Handler.WithAttrs(a), h.min} }
func (h handler) WithGroup(n string) slog.Handler      { return handler{h.Handler.WithGroup(n), h.min} }
