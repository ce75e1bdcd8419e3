package secretscan

import (
	"html"
	"math/rand/v2"
	"net/url"
	"regexp/syntax"
	"sort"
	"strings"
	"testing"

	"github.com/zricethezav/gitleaks/v8/detect"
)

// keywordLines are ordinary assignments of a keyword rule's secret: {k}
// is one of the rule's keywords, {K} the same in capitals, {s} the secret.
// Each is used for a rule only where gitleaks finds the secret in it.
var keywordLines = []string{
	`{k}_token = "{s}"`,
	`export {K}_API_KEY={s}`,
	`  "{k}_key": "{s}",`,
	`{k}Secret: '{s}'`,
	`{k}.password={s}`,
}

// lineContexts put a whole line (one gitleaks finds a secret in) into the
// places our texts quote code from: a diff, comments, a JSON string (Go's
// encoder writes < > & as \u escapes) and JSON in JSON, a YAML block,
// Markdown, Windows line ends, HTML with escaped quotes, URL encoding, CSV
// and SQL quoting, no-break spaces and typographic quotes, a sentence.
var lineContexts = map[string]func(string) string{
	"diff":     func(l string) string { return "@@ -1,3 +1,4 @@\n context\n+" + l + "\n context" },
	"comment":  func(l string) string { return "// " + l },
	"hash":     func(l string) string { return "# " + l },
	"json":     func(l string) string { return `{"body":` + jsonString(l) + `,"line":3}` },
	"yaml":     func(l string) string { return "note: |\n  " + l + "\nnext: 1" },
	"markdown": func(l string) string { return "See:\n```\n" + l + "\n```\n" },
	"crlf":     func(l string) string { return "first\r\n" + l + "\r\nnext line\r\n" },
	"indented": func(l string) string { return "\t\t" + l },
	"backtick": func(l string) string { return "Found `" + l + "` in config." },
	"quote":    func(l string) string { return "> " + l },
	"html":     func(l string) string { return "<pre>" + html.EscapeString(l) + "</pre>" },
	"html-attr": func(l string) string {
		return `<div data-config="` + html.EscapeString(`{"line":`+jsonString(l)+`}`) + `"></div>`
	},
	"json-in-json": func(l string) string { return jsonString(`{"body":` + jsonString(l) + `}`) },
	"url-query":    func(l string) string { return "GET /search?q=" + url.QueryEscape(l) + "&page=2" },
	"url-path":     func(l string) string { return "https://x.example/" + url.PathEscape(l) },
	"csv":          func(l string) string { return `1,"` + strings.ReplaceAll(l, `"`, `""`) + `",high` },
	"sql":          func(l string) string { return `INSERT INTO t VALUES ('` + strings.ReplaceAll(l, `'`, `''`) + `');` },
	"no-break":     func(l string) string { return strings.ReplaceAll(l, " ", "\u00a0") },
	"typographic": func(l string) string {
		return strings.NewReplacer(`"`, "\u201c", `'`, "\u2019").Replace(l)
	},
}

// TestRedactKeywordLinesInContexts samples secrets of every rule (with four
// seeds, one with -short), writes each into the keyword lines gitleaks finds it in, puts those
// lines (and the rule's own generated line, and a token rule's bare secret)
// into every context, and checks that the secret never survives.
func TestRedactKeywordLinesInContexts(t *testing.T) {
	t.Parallel()
	rs, err := rules()
	if err != nil {
		t.Fatal(err)
	}
	d := naiveDetector(t)
	red := New()
	ids := make([]string, 0, len(rs.cfg.Rules))
	for id := range rs.cfg.Rules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	// Four seeds find more shapes, and every line goes into every
	// context. -short (CI, under -race) runs one seed and puts each line
	// into one context, taken in turn so that all are used.
	seeds, perLine := uint64(4), len(lineContexts)
	if testing.Short() {
		seeds, perLine = 1, 1
	}
	contextNames := make([]string, 0, len(lineContexts))
	for cn := range lineContexts {
		contextNames = append(contextNames, cn)
	}
	sort.Strings(contextNames)
	var bareContexts []int
	for i, c := range plantContexts {
		if c.name != "glued" { // gitleaks can't tell where a glued token ends either
			bareContexts = append(bareContexts, i)
		}
	}
	sampled, lines := 0, 0
	for _, id := range ids {
		cr := rs.cfg.Rules[id]
		if cr.Regex == nil {
			continue
		}
		tree, err := syntax.Parse(cr.Regex.String(), syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		failed := false
		for seed := uint64(0); seed < seeds && !failed; seed++ {
			secret, line := sampleRule(d, rand.New(rand.NewPCG(seed+100, 7)), tree, id, 50)
			if secret == "" {
				continue
			}
			sampled++
			ins := map[string]string{"own line": line}
			for ti, tpl := range keywordLines {
				for _, kw := range cr.Keywords {
					l := strings.NewReplacer("{k}", kw, "{K}", strings.ToUpper(kw), "{s}", secret).Replace(tpl)
					if !finds(d, l, secret) {
						continue
					}
					lines++
					for _, cn := range pick(contextNames, lines, perLine) {
						ins[cn+" of line "+string(rune('1'+ti))] = lineContexts[cn](l)
					}
					break
				}
			}
			if finds(d, secret, secret) {
				// A token gitleaks finds alone: also bare in the corpus
				// test's contexts (a path, a sentence, XML, a query).
				for _, i := range pick(bareContexts, sampled, perLine) {
					ins["bare in "+plantContexts[i].name] = plantContexts[i].build(secret)
				}
			}
			for name, in := range ins {
				if out, _ := red.Redact(in); strings.Contains(out, secret) {
					t.Errorf("%s (seed %d), %s: secret %q survives in %.300q", id, seed, name, secret, in)
					failed = true
				}
			}
		}
	}
	if sampled < 200*int(seeds) || lines < 900*int(seeds) {
		t.Fatalf("only %d samples and %d keyword lines", sampled, lines)
	}
	t.Logf("%d samples, %d keyword lines", sampled, lines)
}

// pick returns n of xs starting at the k-th, in turn (all if n >= len(xs)).
func pick[T any](xs []T, k, n int) []T {
	if n >= len(xs) {
		return xs
	}
	out := make([]T, n)
	for i := range out {
		out[i] = xs[(k+i)%len(xs)]
	}
	return out
}

// sampleRule generates text from the rule's regex until gitleaks reports a
// secret of at least 8 bytes for the rule in it that the policy does not
// deliberately narrow (at most tries times).
func sampleRule(d *detect.Detector, r *rand.Rand, tree *syntax.Regexp, id string, tries int) (secret, line string) {
	for try := 0; try < tries; try++ {
		line := sampleString(r, tree)
		for _, f := range d.DetectString(line) {
			if f.RuleID == id && len(f.Secret) >= 8 && !narrowed(id, f.Secret) {
				return f.Secret, line
			}
		}
	}
	return "", ""
}

// finds reports whether gitleaks reports secret in s.
func finds(d *detect.Detector, s, secret string) bool {
	for _, f := range d.DetectString(s) {
		if f.Secret == secret {
			return true
		}
	}
	return false
}
