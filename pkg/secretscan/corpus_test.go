package secretscan

import (
	"strings"
	"testing"
)

// plantContext puts a planted text into a context. keep lists text around
// it that must survive redaction; lead and trail must start and end the
// output.
type plantContext struct {
	name        string
	build       func(plant string) string
	lead, trail string
	keep        []string
	// ownKey: the context names the value itself (token=..., <password>),
	// so even a context-dependent secret is planted alone.
	ownKey bool
	// minCount is the least number of redactions expected.
	minCount int
}

var plantContexts = []plantContext{
	{name: "json", build: func(p string) string {
		return `{"title":"Secret in config","body":` + jsonString("Found "+p+" in the diff") + `,"path":"config/app.env","line":12}`
	}, lead: `{"title":"Secret in config","body":"Found `, trail: ` in the diff","path":"config/app.env","line":12}`},
	{name: "go", build: func(p string) string {
		return "\tclient := api.NewClient(api.WithToken(\"" + p + "\")) // rotate before release"
	}, lead: "\tclient := api.NewClient(api.WithToken(\"", trail: "\")) // rotate before release"},
	{name: "python", build: func(p string) string {
		return `    session.headers["Authorization"] = f"Bearer {'` + p + `'}"  # noqa: S105`
	}, lead: `    session.headers["Authorization"] = f"Bearer {'`, trail: `'}"  # noqa: S105`},
	{name: "yaml", build: func(p string) string {
		return "env:\n  - name: UPSTREAM_CREDENTIAL\n    value: " + p + "\n  - name: LOG_LEVEL\n    value: debug"
	}, lead: "env:\n  - name: UPSTREAM_CREDENTIAL\n    value: ", trail: "\n  - name: LOG_LEVEL\n    value: debug"},
	{name: "path", build: func(p string) string { return "config/" + p + "/x.txt" }, lead: "config/", trail: ".txt"},
	// Glued: token alphabets may take in the letters that follow, so only
	// the leading word must survive.
	{name: "glued", build: func(p string) string { return "prefix" + p + "suffix" }, lead: "prefix"},
	{name: "start", build: func(p string) string { return p + " was committed in 3f9c2d1" }, trail: " was committed in 3f9c2d1"},
	{name: "end", build: func(p string) string { return "the leaked value is " + p }, lead: "the leaked value is "},
	{name: "sentence", build: func(p string) string { return "Revoke the credential (" + p + "). It is live." },
		lead: "Revoke the credential (", trail: "It is live."},
	{name: "twice", build: func(p string) string { return "first " + p + " then again " + p + " end" },
		lead: "first ", trail: " end", keep: []string{" then again "}, minCount: 2},
	{name: "markdown", build: func(p string) string { return "Leaked in the diff:\n```\n" + p + "\n```\nPlease rotate." },
		lead: "Leaked in the diff:\n```\n", trail: "\n```\nPlease rotate."},
	{name: "url-query", ownKey: true, build: func(p string) string {
		return "GET https://api.example.com/v1/items?token=" + p + "&page=2 returned 200"
	}, lead: "GET https://api.example.com/v1/items?", trail: "&page=2 returned 200"},
	{name: "xml", ownKey: true, build: func(p string) string { return "<config><password>" + p + "</password></config>" },
		lead: "<config><password>", trail: "</password></config>"},
	{name: "escaped-json", ownKey: true, build: func(p string) string {
		return `	body := "{\"api_key\": \"` + p + `\", \"retries\": 3}"`
	}, lead: `	body := "{\"api_key\": `, trail: `, \"retries\": 3}"`},
}

// TestRedactCorpusContexts plants every corpus secret in many contexts and
// checks that no part of it survives, the text around it does, and the
// redactions are counted.
func TestRedactCorpusContexts(t *testing.T) {
	t.Parallel()
	r := New()
	rs, err := rules()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, ru := range rs.rules {
		ids[ru.id] = true
	}
	// The rules gitleaks reports for each corpus line: in the contexts that
	// keep the line's own words, one of them names a redaction.
	d := naiveDetector(t)
	expect := map[string]map[string]bool{}
	for _, e := range loadCorpus(t) {
		expect[e.Name] = map[string]bool{}
		for _, f := range d.DetectString(e.Line) {
			expect[e.Name][f.RuleID] = true
		}
		if len(expect[e.Name]) == 0 {
			t.Fatalf("gitleaks finds nothing in the line of %s", e.Name)
		}
	}
	named := func(t *testing.T, e corpusEntry, counts map[string]int) {
		t.Helper()
		for id := range expect[e.Name] {
			if counts[id] > 0 {
				return
			}
		}
		t.Errorf("counts %v name none of gitleaks' rules for the line, %v", counts, expect[e.Name])
	}
	check := func(t *testing.T, e corpusEntry, out string, counts map[string]int, minCount int) {
		t.Helper()
		for _, f := range fragments(e.Secret) {
			if strings.Contains(out, f) {
				t.Fatalf("secret survives: %d bytes of %s in output", len(f), e.Name)
			}
		}
		if total(counts) < max(minCount, 1) {
			t.Fatalf("counts %v, want at least %d", counts, max(minCount, 1))
		}
		for id := range counts {
			if !ids[id] {
				t.Fatalf("count for unknown rule %q", id)
			}
		}
		if !strings.Contains(out, "[REDACTED:") {
			t.Fatalf("no marker in output")
		}
	}
	for _, e := range loadCorpus(t) {
		t.Run(e.Name+"/line", func(t *testing.T) {
			out, counts := r.Redact(e.Line)
			check(t, e, out, counts, 1)
			named(t, e, counts)
			i := strings.Index(e.Line, e.Secret)
			if before := e.Line[:i]; !strings.HasPrefix(out, before) {
				t.Errorf("text before the secret lost: %q", before)
			}
			if after := e.Line[i+len(e.Secret):]; !strings.HasSuffix(out, after) {
				t.Errorf("text after the secret lost: %q", after)
			}
		})
		for _, c := range plantContexts {
			t.Run(e.Name+"/"+c.name, func(t *testing.T) {
				plant := e.Secret
				if contextDependent[e.Name] && !c.ownKey {
					plant = e.Line
				}
				in := c.build(plant)
				out, counts := r.Redact(in)
				check(t, e, out, counts, c.minCount)
				if !c.ownKey {
					named(t, e, counts)
				}
				if !strings.HasPrefix(out, c.lead) {
					t.Errorf("leading text lost: want prefix %q, got %.80q", c.lead, out)
				}
				if !strings.HasSuffix(out, c.trail) {
					t.Errorf("trailing text lost: want suffix %q", c.trail)
				}
				for _, k := range c.keep {
					if !strings.Contains(out, k) {
						t.Errorf("text lost: %q", k)
					}
				}
			})
		}
		t.Run(e.Name+"/32KiB", func(t *testing.T) {
			g := newReviewGen(uint64(len(e.Name)))
			base := g.text(32*1024 - len(e.Line) - 1)
			lines := strings.SplitAfter(base, "\n")
			at := g.r.IntN(len(lines))
			in := strings.Join(lines[:at], "") + e.Line + "\n" + strings.Join(lines[at:], "")
			out, counts := r.Redact(in)
			check(t, e, out, counts, 1)
			named(t, e, counts)
			kept := map[string]bool{}
			for _, l := range strings.Split(out, "\n") {
				kept[l] = true
			}
			for _, l := range strings.Split(base, "\n") {
				if !kept[l] {
					t.Fatalf("review text changed: %q", l)
				}
			}
		})
	}
}

// TestRedactAllCorpusInOneString plants every corpus line in one realistic
// 32 KiB review.
func TestRedactAllCorpusInOneString(t *testing.T) {
	t.Parallel()
	es := loadCorpus(t)
	var lines []string
	for _, e := range es {
		lines = append(lines, e.Line)
	}
	in := newReviewGen(99).withSecrets(32*1024, lines)
	out, counts := New().Redact(in)
	for _, e := range es {
		for _, f := range fragments(e.Secret) {
			if strings.Contains(out, f) {
				t.Errorf("%s survives", e.Name)
			}
		}
	}
	if total(counts) < len(es) {
		t.Errorf("counts %v: fewer than %d redactions", counts, len(es))
	}
}
