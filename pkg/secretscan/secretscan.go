// Package secretscan finds and redacts secrets in text for the result
// pipeline (pkg/shape). It is the only package that may import gitleaks.
//
// It must never log or return a secret it found: only rule ids and counts.
package secretscan

import (
	"regexp"
	"strings"
)

// PATRuleID is the rule id of CodeLotse's own personal access tokens, the
// same id as in policies/gitleaks.toml.
const PATRuleID = "codelotse-pat"

// patRE matches a clt_ token: the prefix and 43 base64url characters. It
// deliberately has no word boundaries: a token glued to other text is still
// a token, and redacting too much is the safe failure.
var patRE = regexp.MustCompile(`clt_[A-Za-z0-9_-]{43}`)

// Redactor replaces secrets with [REDACTED:<rule-id>].
type Redactor struct{}

// New returns a redactor.
func New() *Redactor { return &Redactor{} }

// Redact implements shape.Redactor.
func (r *Redactor) Redact(s string) (string, map[string]int) {
	if !strings.Contains(s, "clt_") {
		return s, nil
	}
	var counts map[string]int
	var b strings.Builder
	last := 0
	for _, m := range patRE.FindAllStringIndex(s, -1) {
		b.WriteString(s[last:m[0]])
		b.WriteString("[REDACTED:" + PATRuleID + "]")
		last = m[1]
		if counts == nil {
			counts = map[string]int{}
		}
		counts[PATRuleID]++
	}
	if counts == nil {
		return s, nil
	}
	b.WriteString(s[last:])
	return b.String(), counts
}
