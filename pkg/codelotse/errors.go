package codelotse

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Code classifies an error for the edges: each edge maps it once to its own
// vocabulary (HTTP status, JSON-RPC error, in-band tool error, CLI exit).
type Code string

const (
	Invalid     Code = "invalid"
	NotFound    Code = "not_found"
	Forbidden   Code = "forbidden"
	Conflict    Code = "conflict"
	Unavailable Code = "unavailable"
	Internal    Code = "internal"
)

// Error is the one error type with a code. Message is written for the user
// who will read it; Cause is for logs only and is never shown to a user.
type Error struct {
	Code    Code
	Message string
	Cause   error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Message + ": " + e.Cause.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// Errorf builds an Error with a user-facing message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap attaches an internal cause to a user-facing message.
func Wrap(code Code, cause error, msg string) *Error {
	return &Error{Code: code, Message: msg, Cause: cause}
}

// ErrorCode returns the code of err, Internal for errors without one.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// ErrorMessage returns the user-facing message of err. Errors without a code
// get a generic message so that internal details never leak.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// Clip shortens s to at most n bytes, for repeating what a client sent in a
// message, a log or an audit label. It never splits a UTF-8 sequence (a
// byte cut inside a character is text PostgreSQL refuses) and marks a cut
// with "…" (three bytes more). Without such a bound, an argument as long as
// the request body makes an error message as long.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
