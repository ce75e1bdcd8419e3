// Package secretscan finds and redacts secrets in text for the result
// pipeline (pkg/shape). It is the only package that may import gitleaks.
//
// It must never log or return a secret it found: only rule ids and counts.
// gitleaks' own logger, which logs findings at debug level, is disabled.
//
// # Detection
//
// The rules are gitleaks' default rules plus CodeLotse's own token rule,
// loaded once per process from policies.GitleaksTOML through gitleaks' own
// config loading (viper, [extend] useDefault). Redact replaces everything
// gitleaks' detector reports for the string (same regexes, secret groups,
// entropy thresholds, allowlists and keyword gating), with these
// differences, all towards redacting more:
//
//   - gitleaks:allow comments are ignored, and rules limited to file paths
//     (*.tf, *.yaml, nuget.config, *.php) apply to every string;
//   - relaxed variants of token rules drop the word boundary before the
//     token and the "followed by a quote, space, ';' or end" check after it,
//     so a token in a path, a URL, before '.' or ')' or glued to other words
//     is found (only for tokens with a distinctive literal prefix; a prefix
//     of hex digits such as "4b1d" must follow a non-hex character, and one
//     like "EAAA", common in base64, keeps its word boundary);
//   - keyword-context rules such as generic-api-key also accept '&' and '<'
//     after the secret (URL queries, XML), and read \" as a quote (escaped
//     JSON inside a string);
//   - escaped text (HTML references, \u, \x, octal and percent escapes) is
//     also read decoded (decode.go), and base64 and hex values are decoded
//     as gitleaks' command line does by default; a secret inside one
//     replaces the whole encoded value (encoded.go);
//   - private key blocks without an END line (excerpts) are redacted;
//   - every other occurrence in the string of a secret found once is
//     redacted too (for generic-api-key only if it does not read like an
//     identifier).
//
// Where a rule has a secret group, only the secret is replaced (without
// surrounding quotes), so the text around it stays readable.
//
// # Speed
//
// gitleaks runs every rule whose keyword occurs over the whole string.
// Redact finds all keywords and rule anchors (literal prefixes that every
// match of a regex branch starts with, derived from the regex syntax) in one
// Aho-Corasick pass, checks each anchor occurrence with cheap necessary
// conditions (a byte that must follow within a bounded distance, the
// regex's bounded prefix anchored there) and then with the branch's regex
// anchored there in leftmost-longest mode, and runs the rule's regex only on
// windows around the anchors that pass.
//
// The windows give the same matches as a whole-string scan: a match spans a
// bounded number of bytes or newlines before its anchor (from the regex
// syntax) and at most as far after it as the longest anchored match, so
// every match of the whole string lies in the window of its own anchor,
// windows that overlap are merged, and each is padded so that no match of
// the whole string touches a window edge. Inside a merged window the text
// is the same as in the whole string, so a match there that does not touch
// an edge is a match of the whole string and vice versa, and leftmost-first
// scanning picks the same ones. A match touching an edge can only come from
// the cut; then that rule runs over the whole string (counted in the tests,
// which also compare with gitleaks on generated, random and real text).
// Strings with non-ASCII runes that case-fold to ASCII letters (U+017F,
// U+212A, U+0130), which the ASCII automaton can't see, run gitleaks'
// keyword check and whole-string scans instead.
package secretscan

import (
	"fmt"
	"strings"
	"sync"
)

// PATRuleID is the rule id of CodeLotse's own personal access tokens, the
// same id as in policies/gitleaks.toml.
const PATRuleID = "codelotse-pat"

// Redactor replaces secrets with [REDACTED:<rule-id>]. It is safe for
// concurrent use.
type Redactor struct {
	rs *ruleset
}

var (
	loadOnce sync.Once
	loaded   *ruleset
	loadErr  error
)

// rules returns the process-wide ruleset, built on first use.
func rules() (*ruleset, error) {
	loadOnce.Do(func() {
		defer func() {
			// gitleaks compiles config regexes with MustCompile.
			if p := recover(); p != nil {
				loaded, loadErr = nil, fmt.Errorf("secretscan: building rules: %v", p)
			}
		}()
		cfg, err := loadConfig()
		if err != nil {
			loadErr = err
			return
		}
		loaded, loadErr = buildRuleset(cfg, true)
	})
	return loaded, loadErr
}

// New returns a redactor. The rules are built once per process, on the
// first call; if the embedded configuration were broken (a programming
// error the package tests catch), the redactor would replace every
// non-empty string with [REDACTED:secretscan-unavailable] rather than let
// a secret through.
func New() *Redactor {
	rs, _ := rules()
	return &Redactor{rs: rs}
}

// Unavailable is the rule id reported when the rules could not be built.
const Unavailable = "secretscan-unavailable"

// Redact implements shape.Redactor: it returns s with every secret replaced
// by [REDACTED:<rule-id>] and the number of replacements per rule id, or s
// and nil when there is nothing to replace.
func (r *Redactor) Redact(s string) (string, map[string]int) {
	if s == "" {
		return s, nil
	}
	if r == nil || r.rs == nil {
		return "[REDACTED:" + Unavailable + "]", map[string]int{Unavailable: 1}
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	// Until a pass finds nothing (maxPasses explains why).
	var counts map[string]int
	for pass := 0; pass < maxPasses; pass++ {
		found, ok := r.findSafe(s, sc)
		if !ok {
			return "[REDACTED:" + Unavailable + "]", map[string]int{Unavailable: 1}
		}
		spans := fresh(s, found, pass)
		if len(spans) == 0 {
			break
		}
		var c map[string]int
		s, c = r.replace(s, spans, func(b *strings.Builder, _, placeholder string) { b.WriteString(placeholder) })
		counts = addCounts(counts, c)
	}
	return s, counts
}

// findSafe is rs.find failing closed: a panic in the rules (a bug, such as
// an index past a string's end on some input) reports ok == false, and the
// caller hides the whole string as when the rules are unavailable, rather
// than crash the ingestion job or lose the answer. The scratch memory is
// reset, since the panic may have left it half-written.
func (r *Redactor) findSafe(s string, sc *scratch) (spans []span, ok bool) {
	defer func() {
		if recover() != nil {
			*sc = scratch{}
			spans, ok = nil, false
		}
	}()
	return r.rs.find(s, sc), true
}

// replace rewrites s with every span (sorted, possibly overlapping) replaced
// by write, which receives the secret's text and its placeholder
// [REDACTED:<rule-id>]; overlapping spans merge under the rule with the
// highest label. It returns the replacements per rule id. Redact writes one
// placeholder per secret, RedactDocument one per line of it.
func (r *Redactor) replace(s string, spans []span, write func(b *strings.Builder, secret, placeholder string)) (string, map[string]int) {
	counts := map[string]int{}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for i := 0; i < len(spans); {
		start, end, ri := spans[i].start, spans[i].end, spans[i].rule
		j := i + 1
		for j < len(spans) && spans[j].start < end {
			end = max(end, spans[j].end)
			if r.rs.rules[spans[j].rule].label > r.rs.rules[ri].label {
				ri = spans[j].rule
			}
			j++
		}
		id := r.rs.rules[ri].id
		b.WriteString(s[last:start])
		write(&b, s[start:end], "[REDACTED:"+id+"]")
		counts[id]++
		last = end
		i = j
	}
	b.WriteString(s[last:])
	return b.String(), counts
}
