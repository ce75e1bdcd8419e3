package main

import (
	"fmt"
	"io"
	"os"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/importer"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// maxImportBytes bounds an import file.
const maxImportBytes = 256 << 20

// cmdImportReview: cltctl import review --tenant SLUG FILE
func cmdImportReview(e *env, args []string) error {
	fs := e.flags("import review")
	slug := fs.String("tenant", "", "tenant slug")
	pos, err := parsePositional(fs, args, 1)
	if err != nil {
		return err
	}
	if err := need("tenant", *slug); err != nil {
		return err
	}
	data, err := readImportFile(pos[0])
	if err != nil {
		return err
	}
	imp, err := importer.ParseReview(data)
	if err != nil {
		return prefixed(pos[0], err)
	}
	return storeImport(e, *slug, pos[0], imp)
}

// cmdImportSARIF: cltctl import sarif --tenant SLUG --repo OWNER/NAME [--pr N --commit SHA] FILE
func cmdImportSARIF(e *env, args []string) error {
	fs := e.flags("import sarif")
	slug := fs.String("tenant", "", "tenant slug")
	repo := fs.String("repo", "", "OWNER/NAME the results belong to")
	pr := fs.Int("pr", 0, "pull request number the results belong to")
	commit := fs.String("commit", "", "commit that was analysed")
	pos, err := parsePositional(fs, args, 1)
	if err != nil {
		return err
	}
	if err := need("tenant", *slug, "repo", *repo); err != nil {
		return err
	}
	if *pr < 0 {
		return usageError{"--pr must be a positive number"}
	}
	data, err := readImportFile(pos[0])
	if err != nil {
		return err
	}
	imp, err := importer.ParseSARIF(data, importer.SARIFOptions{Repository: *repo, PRNumber: *pr, Commit: *commit})
	if err != nil {
		return prefixed(pos[0], err)
	}
	return storeImport(e, *slug, pos[0], imp)
}

func storeImport(e *env, slug, file string, imp codelotse.ReviewImport) error {
	var res postgres.ImportResult
	err := e.inTenant(slug, func(tx *postgres.Tx) error {
		var err error
		res, err = e.ingester().Import(e.ctx, tx, imp, operator)
		return err
	})
	if err != nil {
		return prefixed(file, err)
	}
	where := imp.Repository
	if imp.PullRequest != nil {
		where = fmt.Sprintf("%s#%d", imp.Repository, imp.PullRequest.Number)
	}
	fmt.Fprintf(e.stdout, "imported review %d (%s) into %s: %d findings stored, %d removed\n",
		res.ReviewID, imp.Review.ExternalID, where, res.Findings, res.Removed)
	return nil
}

func readImportFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, codelotse.Errorf(codelotse.Invalid, "cannot read %s: %v", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxImportBytes+1))
	if err != nil {
		return nil, codelotse.Errorf(codelotse.Invalid, "cannot read %s: %v", name, err)
	}
	if len(data) > maxImportBytes {
		return nil, codelotse.Errorf(codelotse.Invalid, "%s is larger than %d MiB", name, maxImportBytes>>20)
	}
	return data, nil
}

// prefixed puts the file name in front of an invalid-input message.
func prefixed(file string, err error) error {
	if codelotse.ErrorCode(err) == codelotse.Invalid {
		return codelotse.Errorf(codelotse.Invalid, "%s: %s (nothing was imported)", file, codelotse.ErrorMessage(err))
	}
	return err
}
