package filter

import (
	"io"

	"github.com/corazawaf/coraza/v3/debuglog"
)

// debugLogger is Coraza's own debug logger (debuglog.Noop, the one a WAF
// gets by default, which SecDebugLog and SecDebugLogLevel then set up)
// with a With that is cheap while the logger logs nothing at all.
//
// Coraza calls With for every transaction and for every rule of a chain it
// evaluates, whether or not anything is logged; its default logger then
// renders the field into a new buffer and copies the logger, about four
// allocations a call, 40 for a benign GET with the CRS. Here a logger
// that logs nothing keeps the fields as they are given, and renders them
// only if SecDebugLogLevel or ctl:debugLogLevel later raises the level of
// that very logger, so what it writes is the same as Coraza's.
type debugLogger struct {
	// inner is Coraza's logger with every field of the parents that
	// was rendered; it decides what is written and where.
	inner debuglog.Logger
	// silent: inner logs nothing at any level.
	silent bool
	// While silent: the logger this one was made from by With, and
	// the fields With was given, not yet rendered into inner.
	parent *debugLogger
	fields []debuglog.ContextField
}

var _ debuglog.Logger = (*debugLogger)(nil)

// newDebugLogger returns the logger a WAF starts with.
func newDebugLogger() *debugLogger {
	return wrapDebugLogger(debuglog.Noop())
}

func wrapDebugLogger(inner debuglog.Logger) *debugLogger {
	return &debugLogger{inner: inner, silent: !inner.Error().IsEnabled()}
}

// rendered returns inner with the pending fields of l and of its parents,
// the oldest first, as Coraza's With would have rendered them.
func (l *debugLogger) rendered() debuglog.Logger {
	if l.parent == nil {
		return l.inner
	}
	return l.parent.rendered().With(l.fields...)
}

// WithOutput implements debuglog.Logger.
func (l *debugLogger) WithOutput(w io.Writer) debuglog.Logger {
	return wrapDebugLogger(l.rendered().WithOutput(w))
}

// WithLevel implements debuglog.Logger.
func (l *debugLogger) WithLevel(lvl debuglog.Level) debuglog.Logger {
	return wrapDebugLogger(l.rendered().WithLevel(lvl))
}

// With implements debuglog.Logger.
func (l *debugLogger) With(fs ...debuglog.ContextField) debuglog.Logger {
	if !l.silent {
		return wrapDebugLogger(l.inner.With(fs...))
	}
	// fs is the call's own slice: nobody writes it after the call.
	return &debugLogger{inner: l.inner, silent: true, parent: l, fields: fs}
}

// silentEvent is what every level of a silent logger returns: Coraza's
// no-op event. Coraza asks for an event before most things it does (each
// rule skipped or evaluated, each action), so a silent logger answers
// without asking inner.
var silentEvent = debuglog.Noop().Debug()

// Trace implements debuglog.Logger.
func (l *debugLogger) Trace() debuglog.Event {
	if l.silent {
		return silentEvent
	}
	return l.inner.Trace()
}

// Debug implements debuglog.Logger.
func (l *debugLogger) Debug() debuglog.Event {
	if l.silent {
		return silentEvent
	}
	return l.inner.Debug()
}

// Info implements debuglog.Logger.
func (l *debugLogger) Info() debuglog.Event {
	if l.silent {
		return silentEvent
	}
	return l.inner.Info()
}

// Warn implements debuglog.Logger.
func (l *debugLogger) Warn() debuglog.Event {
	if l.silent {
		return silentEvent
	}
	return l.inner.Warn()
}

// Error implements debuglog.Logger.
func (l *debugLogger) Error() debuglog.Event {
	if l.silent {
		return silentEvent
	}
	return l.inner.Error()
}
