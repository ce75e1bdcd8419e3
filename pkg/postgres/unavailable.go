package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// unavailableMessage is what a user reads when the database cannot be
// reached: nothing they did was wrong, and the same request will work again
// once PostgreSQL is back.
const unavailableMessage = "The database is unavailable; try again shortly."

// classifyConn marks an error that means PostgreSQL could not be reached or
// dropped the connection (a restart, a failover, a network cut) as
// codelotse.Unavailable, so that every edge answers "try again" (HTTP 503)
// instead of an internal error. The pool reconnects by itself; only the
// requests caught in the outage see this. Other errors are returned
// unchanged, and so are errors that already carry a code other than
// Internal (a tool's Not found stays Not found).
func classifyConn(err error) error {
	if err == nil {
		return nil
	}
	var ce *codelotse.Error
	if errors.As(err, &ce) && ce.Code != codelotse.Internal {
		return err
	}
	if !isConnFailure(err) {
		return err
	}
	return codelotse.Wrap(codelotse.Unavailable, err, unavailableMessage)
}

// isConnFailure reports whether err is a failure to reach or keep a
// connection, as opposed to a failing statement. It is classified by type
// and SQLSTATE, never by message text.
func isConnFailure(err error) bool {
	if code := sqlState(err); code != "" {
		return isConnState(code)
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	// The caller's own deadline or cancellation is not an outage (and
	// context.DeadlineExceeded would pass for a net.Error below).
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	// A connection the server closed under a running query surfaces as
	// an EOF or a reset from the socket.
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}
