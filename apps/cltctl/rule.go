package main

import (
	"fmt"
	"path"
	"strings"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// cmdRuleAdd: cltctl rule add --tenant SLUG [--repo OWNER/NAME] --key K --title T --severity S --instructions TEXT [--paths GLOB,GLOB]
func cmdRuleAdd(e *env, args []string) error {
	fs := e.flags("rule add")
	slug := fs.String("tenant", "", "tenant slug")
	repo := fs.String("repo", "", "OWNER/NAME for a repository rule (default: tenant-wide)")
	key := fs.String("key", "", "rule key, e.g. go/sql-injection")
	title := fs.String("title", "", "short title")
	sev := fs.String("severity", "", "info, low, medium, high or critical")
	instr := fs.String("instructions", "", "what the rule asks reviewers and agents to check")
	paths := fs.String("paths", "", "comma-separated path globs the rule applies to (default: all)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug, "key", *key, "title", *title, "severity", *sev, "instructions", *instr); err != nil {
		return err
	}
	severity, err := codelotse.ParseSeverity(*sev)
	if err != nil {
		return usageError{"--severity must be one of info, low, medium, high, critical"}
	}
	if err := displayName("title", *title); err != nil {
		return err
	}
	var globs []string
	for _, g := range strings.Split(*paths, ",") {
		if g = strings.TrimSpace(g); g != "" {
			if _, err := path.Match(g, ""); err != nil {
				return usageError{fmt.Sprintf("--paths: %q is not a valid glob", g)}
			}
			globs = append(globs, g)
		}
	}
	err = e.inTenant(*slug, func(tx *postgres.Tx) error {
		var repoID *int64
		if *repo != "" {
			r, err := tx.RepositoryByName(e.ctx, *repo)
			if err != nil {
				return err
			}
			repoID = &r.ID
		}
		_, err := e.ingester().UpsertRule(e.ctx, tx, repoID, codelotse.Rule{Key: *key, Title: *title, Severity: severity, PathGlobs: globs, Instructions: *instr})
		return err
	})
	if err != nil {
		return err
	}
	scope := "tenant-wide"
	if *repo != "" {
		scope = "for " + *repo
	}
	fmt.Fprintf(e.stdout, "rule %s saved (%s)\n", *key, scope)
	return nil
}
