package main

import (
	"fmt"
	"sort"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// cmdRedact: cltctl redact [--tenant SLUG]
//
// Re-runs the ingestion redactor over every stored agent-readable column
// (code index, reviews, findings, pull requests, rules, repositories) of
// one tenant or, by default, of every tenant. Rows stored before redaction
// at ingestion existed (or before a new rule) are rewritten; clean rows
// are left alone, so it is safe to run again. Run it once after upgrading.
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
		st, err := e.ingest.Redact(e.ctx, db, tid)
		if err != nil {
			return err
		}
		tables := make([]string, 0, len(st.Scanned))
		for t := range st.Scanned {
			tables = append(tables, t)
		}
		sort.Strings(tables)
		fmt.Fprintf(e.stdout, "tenant %s:", tid)
		for _, t := range tables {
			fmt.Fprintf(e.stdout, " %s %d/%d", t, st.Changed[t], st.Scanned[t])
			total += st.Changed[t]
		}
		fmt.Fprintln(e.stdout)
	}
	fmt.Fprintf(e.stdout, "redacted %d rows in %d tenants (rewritten/scanned per table above)\n", total, len(tids))
	return nil
}
