package postgres

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// wrap prefixes a returned error with the operation that failed, in the
// style of pkgsite's derrors.Wrap: every exported function of this package
// starts with `defer wrap(&err, "postgres.Name")`, so a log line says which
// query broke and the cause stays reachable with errors.Is and errors.As (a
// *codelotse.Error keeps its code and user message; the edges read those,
// never the prefix). TestErrorsCarryOperation keeps it that way.
func wrap(errp *error, op string) {
	if *errp != nil {
		*errp = fmt.Errorf("%s: %w", op, *errp)
	}
}

// The SQLSTATE codes this package reacts to. Errors are classified by code,
// in this file only, never by message text.
const (
	stateUniqueViolation = "23505"
	stateCheckViolation  = "23514"
	stateDuplicateObject = "42710"
	stateQueryCanceled   = "57014"
)

// sqlState returns err's SQLSTATE, or "" when err is not a PostgreSQL error.
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// isUniqueViolation reports whether err is a unique-constraint violation,
// optionally of the named constraint or index.
func isUniqueViolation(err error, name string) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == stateUniqueViolation {
		return name == "" || pe.ConstraintName == name
	}
	return false
}

// isCheckViolation reports whether err is a CHECK violation.
func isCheckViolation(err error) bool { return sqlState(err) == stateCheckViolation }

func isDuplicateObject(err error) bool { return sqlState(err) == stateDuplicateObject }

// isQueryCanceled reports a statement cancelled by statement_timeout (or a
// cancel request): SQLSTATE 57014.
func isQueryCanceled(err error) bool { return sqlState(err) == stateQueryCanceled }

// isConnState reports whether a SQLSTATE means the connection, not the
// statement, failed. Class 08 is "connection exception"; 57P01–57P03 are
// the server terminating sessions for a shutdown (pg_ctl stop/restart),
// after a crash, or refusing them while it starts up. A statement timeout
// (57014) is a failing statement, not an outage.
func isConnState(code string) bool {
	return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03"
}

// notFound maps pgx.ErrNoRows to a NotFound error with msg.
func notFound(err error, msg string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return codelotse.Errorf(codelotse.NotFound, "%s", msg)
	}
	return err
}
