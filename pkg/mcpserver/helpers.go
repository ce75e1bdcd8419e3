package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// Helpers that more than one tool uses.

// filter is the repository filter of the session's grants.
func (s *session) filter() postgres.RepoFilter {
	return postgres.RepoFilter{All: s.grants.Admin, IDs: s.grants.RepoIDs}
}

// requiredRepo resolves a repository argument that the schema requires
// (so it is present; repositoryArg still checks its form).
func (s *session) requiredRepo(ctx context.Context, raw repoRef) (codelotse.Repository, error) {
	ref, given, err := repositoryArg(raw)
	if err != nil {
		return codelotse.Repository{}, err
	}
	if !given {
		return codelotse.Repository{}, codelotse.Errorf(codelotse.Invalid, `Missing required argument "repository".`)
	}
	return s.deps.DB.Tenant(s.principal.TenantID).ResolveRepository(ctx, s.filter(), ref)
}

// argsHash ties a cursor to the arguments it was made for.
func argsHash(parts ...any) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%v\x00", p)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// optional is an optional number for argsHash: its value, or nil when it
// is absent. (Hashing the pointer itself hashed its address, so a cursor
// of a search with pull_request never continued.)
func optional(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// trimPath drops leading "/" and "./" from a path argument.
func trimPath(p string) string {
	for len(p) > 0 && (p[0] == '/' || (len(p) > 1 && p[:2] == "./")) {
		if p[0] == '/' {
			p = p[1:]
		} else {
			p = p[2:]
		}
	}
	return p
}
