package main

import (
	"fmt"
	"sort"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/ingest"
)

// cmdRedact: cltctl redact [--tenant SLUG]
//
// Re-runs the ingestion redactor over every stored agent-readable column
// (code index, reviews, findings, pull requests, rules, repositories) of
// one tenant or, by default, of every tenant. Rows stored before redaction
// at ingestion existed (or before a new rule) are rewritten; clean rows
// are left alone, so it is safe to run again. Run it once after upgrading.
// Then it redacts the tenant's known secrets' bare values from every stored
// text, the pull requests' overlays included, as the worker's rescan does
// after a secret is learned (pkg/ingest RedactKnown).
func cmdRedact(e *env, args []string) error {
	fs := e.flags("redact")
	slug := fs.String("tenant", "", "tenant slug (default: every tenant)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	db, err := e.admin()
	if err != nil {
		return err
	}
	defer db.Close()
	var tids []string
	if *slug != "" {
		tid, err := e.tenant(db, *slug)
		if err != nil {
			return err
		}
		tids = []string{tid}
	} else if tids, err = db.TenantIDs(e.ctx); err != nil {
		return codelotse.Wrap(codelotse.Unavailable, err, "cannot list the tenants (has `cltctl migrate` run?)")
	}
	total := 0
	for _, tid := range tids {
		st, err := e.ingester().Redact(e.ctx, db, tid)
		if err != nil {
			return err
		}
		total += e.printRedacted("tenant "+tid+":", st)
		known, err := e.ingester().RedactKnown(e.ctx, db, tid, true, operator)
		if err != nil {
			return err
		}
		total += e.printRedacted("tenant "+tid+", known secrets:", known.RedactStats)
	}
	fmt.Fprintf(e.stdout, "redacted %d rows in %d tenants (rewritten/scanned per table above)\n", total, len(tids))
	return nil
}

// printRedacted prints a line of rewritten/scanned rows per table and
// returns the rows rewritten.
func (e *env) printRedacted(label string, st ingest.RedactStats) int {
	tables := make([]string, 0, len(st.Scanned))
	for t := range st.Scanned {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	fmt.Fprint(e.stdout, label)
	n := 0
	for _, t := range tables {
		fmt.Fprintf(e.stdout, " %s %d/%d", t, st.Changed[t], st.Scanned[t])
		n += st.Changed[t]
	}
	fmt.Fprintln(e.stdout)
	return n
}
