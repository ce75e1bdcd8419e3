package secretscan

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"

	"github.com/zricethezav/gitleaks/v8/config"
)

// ruleset is the compiled form of a gitleaks config for Redact.
type ruleset struct {
	cfg      config.Config
	rules    []*rule
	matcher  *matcher
	patterns []string
	// gate[pid] lists the rules for which pattern pid is a gitleaks keyword:
	// as in gitleaks, a rule runs only when one of its keywords occurs.
	gate [][]int32
	// anchors[pid] lists the variant anchors that start with pattern pid.
	anchors []pidAnchors
	// always lists rules without keywords (gitleaks always runs them).
	always []int32
	// manifest is the rule every value of a Kubernetes Secret's data is
	// reported under (secretManifestSpans), -1 without it.
	manifest int32
}

// pidAnchors are the anchors starting with one pattern, and their quick
// checks, deduplicated (a strict and a relaxed variant often share one).
type pidAnchors struct {
	refs   []anchorRef
	quicks []quickCheck
}

type anchorRef struct {
	rule, variant, anchor int32
	quick                 int32 // index in pidAnchors.quicks, or -1
}

// quickCheck is a cheap necessary condition for anchors at an occurrence:
// a byte of need at offset needLo..needHi, then re (if not nil) anchored.
type quickCheck struct {
	re             *regexp.Regexp
	width          int
	need           byteSet
	needLo, needHi int
}

func (q *quickCheck) match(s string, p int) bool {
	if q.needHi >= 0 {
		found := false
		for i, end := p+q.needLo, min(len(s), p+q.needHi+1); i < end; i++ {
			if q.need.has(s[i]) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return q.re == nil || q.re.MatchString(s[p:min(len(s), p+q.width+pad)])
}

// maxQuicksPerPattern bounds the distinct quick checks per pattern, so that
// their results fit a small array per anchor occurrence.
const maxQuicksPerPattern = 16

// rule is one gitleaks rule: its strict regex (gitleaks' own) and relaxed
// variants, all reporting under the rule's id.
type rule struct {
	id      string
	generic bool
	// valuesOnly: learn (Find) only values that look generated. The
	// Secret-manifest spans are every data value, some of them words
	// ("environment: production") that must not be redacted from every
	// later text of the tenant.
	valuesOnly bool
	// userInfo: a match must base64-decode to user:password (base64UserInfo).
	userInfo bool
	// label is the rule's priority for naming a redaction that several
	// rules found: a specific rule over generic-api-key over a rule that
	// gitleaks would only apply to some file paths.
	label    int
	entropy  float64
	allow    []*config.Allowlist
	variants []*variant
}

// variant is one regex of a rule with the anchors that let it run on
// windows. Without anchors (whole == true) it runs on the whole string.
type variant struct {
	re          *regexp.Regexp
	fast        *regexp.Regexp // re for strings without fold runes
	secretGroup int
	relaxed     bool
	whole       bool
	anchors     []compiledAnchor
	// gated: the rule's next variant only widens this one's trailing
	// guard, with the same anchors, so where its prefilter fails at an
	// anchor occurrence this one's fails too.
	gated bool
	// generated: only a match that looks generated (looksGenerated: after
	// its fixed prefix, a digit and no word-like run of lowercase letters)
	// is reported. These variants find a token by a short prefix (Vault's
	// "s.") or a keyword rule's secret without its keyword (secretToken),
	// where identifiers match too (s.ReadUint16LengthPrefixed,
	// live_stream_configuration_…); generated tokens nearly always hold a
	// digit and seldom such a run.
	generated bool
	// prefix matches the fixed start of a generated variant's secret
	// (s., key-), which the test skips.
	prefix *regexp.Regexp
}

type compiledAnchor struct {
	lits             []string
	quick            quickCheck
	hasQuick         bool
	pre              *regexp.Regexp
	before, beforeNL int
	after, afterNL   int
}

// privateKeyRelaxed also redacts private key blocks without an END line
// (a key cut off in an excerpt) and with escaped newlines: the header and
// every following base64 chunk of 16 or more characters, plus the END line
// if there is one.
const privateKeyRelaxed = `(?i)-----BEGIN[ A-Z0-9_-]{0,100}?PRIVATE KEY(?: BLOCK)?-----` +
	`(?:(?:\s|\\[nrt])+(?:[a-z0-9+/=]{16,}|proc-type:[^\n\\]*|dek-info:[^\n\\]*))*` +
	`(?:(?:\s|\\[nrt])*[a-z0-9+/=]{0,16}(?:\s|\\[nrt])*-----END[ A-Z0-9_-]{0,100}?PRIVATE KEY(?: BLOCK)?-----)?`

// buildRuleset compiles cfg; without relax, only gitleaks' own regexes are
// used (for tests that compare with gitleaks).
func buildRuleset(cfg config.Config, relax bool) (*ruleset, error) {
	rs := &ruleset{cfg: cfg}
	pidOf := map[string]int32{}
	pattern := func(s string) int32 {
		if pid, ok := pidOf[s]; ok {
			return pid
		}
		pid := int32(len(rs.patterns))
		pidOf[s] = pid
		rs.patterns = append(rs.patterns, s)
		rs.gate = append(rs.gate, nil)
		rs.anchors = append(rs.anchors, pidAnchors{})
		return pid
	}

	quicks := map[string]*regexp.Regexp{}
	ids := make([]string, 0, len(cfg.Rules))
	for id := range cfg.Rules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		cr := cfg.Rules[id]
		if cr.Regex == nil || cr.SkipReport {
			// Path-only rules need a file name, which Redact never has;
			// SkipReport rules only support other rules.
			continue
		}
		r := &rule{
			id:      cr.RuleID,
			generic: strings.Contains(strings.ToLower(cr.RuleID), "generic"),
			label:   2,
			entropy: cr.Entropy,
			allow:   append(append([]*config.Allowlist{}, cfg.Allowlists...), cr.Allowlists...),
		}
		switch {
		case cr.Path != nil:
			r.label = 0
		case r.generic:
			r.label = 1
		}
		ri := int32(len(rs.rules))

		strict, err := newVariant(cr.Regex, cr.SecretGroup, false, quicks)
		if err != nil {
			return nil, fmt.Errorf("secretscan: rule %s: %w", id, err)
		}
		r.variants = append(r.variants, strict)

		tree, err := syntax.Parse(cr.Regex.String(), syntax.Perl)
		if err != nil {
			return nil, fmt.Errorf("secretscan: rule %s: %w", id, err)
		}
		var relaxed []string
		// generated: variants whose matches must look generated.
		var generated []string
		guardOnly, hasToken := false, false
		if relax {
			if id == "private-key" {
				relaxed = append(relaxed, privateKeyRelaxed)
			} else if src, weak := relaxToken(tree, cr.SecretGroup > 0); src != "" || weak != "" {
				// A distinctive single-line token: drop the context guards.
				if src != "" {
					relaxed = append(relaxed, src)
				}
				if weak != "" {
					generated = append(generated, weak)
				}
				hasToken = true
			} else if src := relaxGuard(tree); src != "" {
				// Keyword context: accept a few more terminators.
				relaxed = append(relaxed, src)
				guardOnly = true
			}
		}
		for _, src := range relaxed {
			re, err := regexp.Compile(src)
			if err != nil {
				return nil, fmt.Errorf("secretscan: rule %s: relaxed regex: %w", id, err)
			}
			sg := cr.SecretGroup
			if re.NumSubexp() < sg {
				sg = 0
			}
			v, err := newVariant(re, sg, true, quicks)
			if err != nil {
				return nil, fmt.Errorf("secretscan: rule %s: %w", id, err)
			}
			r.variants = append(r.variants, v)
		}

		if guardOnly && len(r.variants) == 2 && sameAnchors(r.variants[0], r.variants[1]) {
			r.variants[0].gated = true
		}
		if relax && id != "private-key" && !hasToken {
			if src := secretToken(tree, cr.SecretGroup); src != "" {
				// The secret group is a token of its own: find it
				// without the keyword too.
				generated = append(generated, src)
			}
		}
		for _, src := range generated {
			re, err := regexp.Compile(src)
			if err != nil {
				return nil, fmt.Errorf("secretscan: rule %s: relaxed regex: %w", id, err)
			}
			v, err := newVariant(re, 0, true, quicks)
			if err != nil {
				return nil, fmt.Errorf("secretscan: rule %s: %w", id, err)
			}
			if v.whole {
				// Without anchors it would run on every string.
				continue
			}
			v.generated = true
			if v.prefix, err = literalPrefix(src); err != nil {
				return nil, fmt.Errorf("secretscan: rule %s: %w", id, err)
			}
			r.variants = append(r.variants, v)
			// The variant finds the token without the rule's keyword
			// (mailgun's key-…): its anchors activate the rule too.
			for _, a := range v.anchors {
				for _, lit := range a.lits {
					pid := pattern(lit)
					rs.gate[pid] = appendUnique(rs.gate[pid], ri)
				}
			}
		}
		// Relaxed variants first, so that a failed relaxed prefilter can
		// skip the strict one.
		for vi := len(r.variants) - 1; vi >= 0; vi-- {
			v := r.variants[vi]
			if v.whole {
				continue
			}
			for ai, a := range v.anchors {
				for _, lit := range a.lits {
					pid := pattern(lit)
					pa := &rs.anchors[pid]
					ref := anchorRef{rule: ri, variant: int32(vi), anchor: int32(ai), quick: -1}
					if a.hasQuick {
						for qi, q := range pa.quicks {
							if q == a.quick {
								ref.quick = int32(qi)
							}
						}
						if ref.quick < 0 && len(pa.quicks) < maxQuicksPerPattern {
							ref.quick = int32(len(pa.quicks))
							pa.quicks = append(pa.quicks, a.quick)
						}
					}
					pa.refs = append(pa.refs, ref)
				}
			}
		}
		if len(cr.Keywords) == 0 {
			rs.always = append(rs.always, ri)
		}
		for _, k := range cr.Keywords {
			k = strings.ToLower(k)
			if k == "" || !isASCII(k) {
				// Keyword presence can't be found by the ASCII
				// automaton: run the rule always (a superset).
				rs.always = append(rs.always, ri)
				continue
			}
			pid := pattern(k)
			rs.gate[pid] = appendUnique(rs.gate[pid], ri)
		}
		rs.rules = append(rs.rules, r)
	}
	rs.matcher = newMatcher(rs.patterns)
	for _, r := range rs.rules {
		// Rules whose match may be a word (a URL's password "postgres",
		// prose after "Authorization: Basic") redact it where found but
		// learn only values that look generated: the policy tags them.
		r.valuesOnly = slices.Contains(cfg.Rules[r.id].Tags, learnGeneratedOnly)
		r.userInfo = slices.Contains(cfg.Rules[r.id].Tags, base64UserInfo)
	}
	rs.manifest = -1
	for _, r := range rs.rules {
		if r.id == manifestRule {
			// A rule of its own (no variants, never activated by a
			// keyword), named and ranked as gitleaks' rule.
			rs.manifest = int32(len(rs.rules))
			rs.rules = append(rs.rules, &rule{id: r.id, label: r.label, valuesOnly: true})
			break
		}
	}
	return rs, nil
}

// newVariant analyses re; quicks deduplicates the compiled quick checks.
func newVariant(re *regexp.Regexp, secretGroup int, relaxed bool, quicks map[string]*regexp.Regexp) (*variant, error) {
	v := &variant{re: re, secretGroup: secretGroup, relaxed: relaxed}
	tree, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return nil, err
	}
	if v.fast, err = regexp.Compile(foldASCII(tree).String()); err != nil {
		return nil, fmt.Errorf("ASCII-folded regex: %w", err)
	}
	as, ok := anchorsOf(tree)
	if !ok {
		v.whole = true
		return v, nil
	}
	for _, a := range as {
		pre, err := regexp.Compile(a.pre)
		if err != nil {
			return nil, fmt.Errorf("anchored prefilter %q: %w", a.pre, err)
		}
		pre.Longest()
		ca := compiledAnchor{
			lits:     a.lits,
			pre:      pre,
			before:   a.before,
			beforeNL: a.beforeNL,
			after:    a.after,
			afterNL:  a.afterNL,
			quick:    quickCheck{width: a.quickWidth, need: a.need, needLo: a.needLo, needHi: a.needHi},
			hasQuick: a.quick != "" || a.needHi >= 0,
		}
		if a.quick != "" {
			q, ok := quicks[a.quick]
			if !ok {
				if q, err = regexp.Compile(a.quick); err != nil {
					return nil, fmt.Errorf("quick check %q: %w", a.quick, err)
				}
				quicks[a.quick] = q
			}
			ca.quick.re = q
		}
		v.anchors = append(v.anchors, ca)
	}
	return v, nil
}

func sameAnchors(a, b *variant) bool {
	if a.whole || b.whole || len(a.anchors) != len(b.anchors) {
		return false
	}
	for i := range a.anchors {
		if !slices.Equal(a.anchors[i].lits, b.anchors[i].lits) ||
			a.anchors[i].before != b.anchors[i].before || a.anchors[i].beforeNL != b.anchors[i].beforeNL {
			return false
		}
	}
	return true
}

func appendUnique(s []int32, v int32) []int32 {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
