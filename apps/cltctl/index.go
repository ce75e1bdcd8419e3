package main

import (
	"fmt"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// cmdIndex: cltctl index --tenant SLUG --repo OWNER/NAME [--ref REF] DIR
//
// Reads the git checkout at DIR at REF (default HEAD) and replaces the
// repository's code index with it in one transaction.
func cmdIndex(e *env, args []string) error {
	fs := e.flags("index")
	slug := fs.String("tenant", "", "tenant slug")
	repo := fs.String("repo", "", "OWNER/NAME (registered with cltctl repo add)")
	ref := fs.String("ref", "HEAD", "branch, tag or commit to index")
	pos, err := parsePositional(fs, args, 1)
	if err != nil {
		return err
	}
	if err := need("tenant", *slug, "repo", *repo); err != nil {
		return err
	}
	snap, err := codeindex.ReadGit(e.ctx, pos[0], *ref)
	if err != nil {
		return err
	}
	var res postgres.IndexResult
	err = e.inTenant(*slug, func(tx *postgres.Tx) error {
		r, err := tx.RepositoryByName(e.ctx, *repo)
		if err != nil {
			return err
		}
		res, err = e.ingester().Index(e.ctx, tx, r.ID, snap, operator)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "indexed %s at %s: %d files, %d chunks\n", *repo, res.Commit, res.Files-len(res.Skipped), res.Chunks)
	for _, f := range res.Skipped {
		fmt.Fprintf(e.stdout, "  skipped %s (%s, %d bytes)\n", f.Path, f.SkipReason, f.Size)
	}
	return nil
}
