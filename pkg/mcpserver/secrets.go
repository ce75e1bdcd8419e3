package mcpserver

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/secretscan"
	"github.com/codelotse/codelotse/pkg/shape"
)

// KnownSecrets caches each tenant's known-secret fingerprints for a few
// seconds, so that tools redact values learned at import time without a
// query per call. A value learned by an import is redacted everywhere
// within knownTTL; the pattern redactor applies at once regardless.
type KnownSecrets struct {
	DB *postgres.DB
	mu sync.Mutex
	m  map[string]knownEntry
}

type knownEntry struct {
	set *secretscan.Known
	at  time.Time
}

const knownTTL = 5 * time.Second

// For returns the tenant's known secrets (nil when none or on error: the
// pattern redactor still runs, and the error is returned for logging).
func (k *KnownSecrets) For(ctx context.Context, tenantID string) (*secretscan.Known, error) {
	if k == nil || k.DB == nil {
		return nil, nil
	}
	k.mu.Lock()
	e, ok := k.m[tenantID]
	k.mu.Unlock()
	if ok && time.Since(e.at) < knownTTL {
		return e.set, nil
	}
	fps, err := k.DB.Tenant(tenantID).SecretFingerprints(ctx)
	if err != nil {
		return nil, err
	}
	found := make([]secretscan.Found, 0, len(fps))
	for _, f := range fps {
		var h [32]byte
		copy(h[:], f.Fingerprint)
		found = append(found, secretscan.Found{RuleID: f.RuleID, Fingerprint: h, Length: f.Length})
	}
	set := secretscan.NewKnown(found)
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]knownEntry{}
	}
	k.m[tenantID] = knownEntry{set: set, at: time.Now()}
	k.mu.Unlock()
	return set, nil
}

// shaper returns the request's shaper: the base redactor, then the
// tenant's known secrets.
func (s *session) shaper(ctx context.Context) *shape.Shaper {
	known, err := s.deps.Known.For(ctx, s.principal.TenantID)
	if err != nil {
		s.deps.Logger.Warn("loading known secrets failed; redacting by pattern only", "err", err)
	}
	if known == nil {
		return s.deps.Shaper
	}
	return s.deps.Shaper.WithRedactor(secretscan.Chain{s.deps.Shaper.Redactor(), known})
}

// documentRedactor is implemented by the base redactor (pkg/secretscan).
type documentRedactor interface {
	RedactDocument(string) (string, map[string]int)
}

// redactLines is the second layer over stored text (which ingestion has
// already redacted): a window of consecutive lines is sanitised and
// redacted as one document, so rules that need the surrounding lines
// (private keys, Kubernetes Secret manifests, keyword assignments) see
// them, then each line by the tenant's known secrets. Lines are only shown
// after this, and clipped only after it. The counts are added to into.
func (s *session) redactLines(ctx context.Context, lines []string, into map[string]int) []string {
	joined := shape.Sanitize(strings.Join(lines, "\n"))
	if dr, ok := s.deps.Shaper.Redactor().(documentRedactor); ok {
		var counts map[string]int
		joined, counts = dr.RedactDocument(joined)
		for k, n := range counts {
			into[k] += n
		}
	}
	out := strings.Split(joined, "\n")
	if len(out) != len(lines) {
		// Never: sanitising and redacting keep every newline.
		out = make([]string, len(lines))
		for i := range out {
			out[i] = "[REDACTED:" + secretscan.Unavailable + "]"
		}
		return out
	}
	known, _ := s.deps.Known.For(ctx, s.principal.TenantID)
	if known != nil {
		for i, l := range out {
			var counts map[string]int
			out[i], counts = known.Redact(l)
			for k, n := range counts {
				into[k] += n
			}
		}
	}
	return out
}
