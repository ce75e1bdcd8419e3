package postgres_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// TestSearchCandidatesRandom is a randomized differential test of
// search_code_candidates: tenants of random shape (repositories, files,
// spacing over buckets, marker words planted with random densities,
// clusters, thinning runs and matches at bucket and sub-bucket boundaries,
// and trigram estimates refreshed, forged or absent), then random queries
// (repositories, patterns, regex, path prefix, position, page size) paged
// forward and compared page by page with the plain reference (matching).
// The structured tests pin each phase of the search with a chosen case;
// this one looks for the combinations nobody chose: whatever phases a
// query goes through, its pages are the reference's.
//
// The seed is fixed (CODE_SEARCH_SEED overrides it, to explore others),
// so a failure reproduces. Under -short fewer queries run per tenant, but
// every kind of repository set, pattern set and position still does.
func TestSearchCandidatesRandom(t *testing.T) {
	t.Parallel()
	seed := uint64(1)
	if s := os.Getenv("CODE_SEARCH_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CODE_SEARCH_SEED=%q: want a non-negative integer", s)
		}
		seed = n
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (rerun with CODE_SEARCH_SEED=%d)", seed, seed)
		}
	})
	rng := rand.New(rand.NewPCG(seed, 2))
	env := pgtest.New(t)

	// Each kind of tenant steers the search to its own phases: few
	// repositories (per-repository windows, runs of a broad prefix), a
	// tenant spread over many buckets (buckets, walks, the rest at once),
	// more repositories than get per-repository windows (id-range windows),
	// and big tenants of one or two repositories (buckets full of matches,
	// sub-buckets, one repository's rest with its own key, a prefix of
	// over 10,000 files that walks the tenant). The estimates are dealt so
	// that each mode occurs twice whatever the seed.
	kinds := []tenantKind{kindFew, kindFew, kindSpread, kindSpread, kindSpread, kindMany, kindBigOne, kindBigTwo}
	var modes []statsMode
	for m := range statsModes {
		modes = append(modes, m, m)
	}
	rng.Shuffle(len(modes), func(i, j int) { modes[i], modes[j] = modes[j], modes[i] })
	// One repository's rest at once (with its own key) needs a
	// repository over several buckets whose estimates do not forbid it.
	if big := slices.Index(kinds, kindBigOne); modes[big] == statsForgeCommon {
		other := slices.IndexFunc(modes, func(m statsMode) bool { return m != statsForgeCommon })
		modes[big], modes[other] = modes[other], modes[big]
	}
	queries := 400
	if testing.Short() {
		// Every pair of a pattern kind and a repository kind (the kinds
		// cycle with the query's number).
		queries = patternKinds * repoKinds
	}
	// CODE_SEARCH_PHASES=1 also asks every page's plans (auto_explain)
	// and logs, per tenant, how many pages went through each phase: what
	// a seed exercises.
	var ph *phaseCounter
	if os.Getenv("CODE_SEARCH_PHASES") != "" {
		conn, plans := explainConn(t, env)
		ph = &phaseCounter{conn: conn, plans: plans}
	}
	fails := 0
	for i, kind := range kinds {
		// A source of its own for each tenant, so that its shape and its
		// first queries are the same under -short.
		rng := rand.New(rand.NewPCG(seed, 100+uint64(i)))
		tn := seedRandomTenant(t, env, rng, fmt.Sprintf("rnd%d", i), kind, modes[i])
		t.Logf("tenant %s", tn.shape)
		if ph != nil {
			ph.seen = map[string]int{}
		}
		for q := 0; q < queries; q++ {
			rq := tn.randomQuery(t, rng, q)
			if !checkRandomQuery(t, env, tn, rq, ph) {
				if fails++; fails >= 10 {
					t.Fatalf("stopping after %d mismatches", fails)
				}
			}
		}
		if ph != nil {
			t.Logf("phases (pages) of %s: %v", tn.id, ph.seen)
		}
	}
}

type tenantKind int

const (
	kindFew tenantKind = iota
	kindSpread
	kindMany
	kindBigOne
	kindBigTwo
)

func (k tenantKind) String() string {
	return [...]string{"few", "spread", "many", "big, one repository", "big, two repositories"}[k]
}

type statsMode int

const (
	statsNone statsMode = iota
	statsRefresh
	statsForgeCommon
	statsForgeRandom
	statsModes
)

func (m statsMode) String() string {
	return [...]string{"no estimates", "estimates refreshed", "estimates forged: every literal common", "estimates forged at random"}[m]
}

// randomMarkers are planted into random chunks of each tenant, each with a
// shape of its own. Mixed case (the search folds ASCII letters), a run of
// more than three trigrams each (so that estimates ask the index with
// their rarest), none a part of another.
var randomMarkers = []string{"Zq1Alpha_Mk", "Xv2Bravo_Mk", "Wj3Charlie_Mk", "Yh4Delta_Mk"}

// seedWords are literals of every chunk seedCode writes, from every chunk
// (func f) to one in 500 (needle_rare), and edge_marker at bucket
// boundaries (with spacing); nomatchatall is in none.
var seedWords = []string{"common", "middleword", "needle_rare", "func f", "edge_marker"}

const absentWord = "nomatchatall"

type randomTenant struct {
	id    string
	repos []int64
	all   []refChunk
	// first and last are each repository's first and last chunk id.
	first, last map[int64]int64
	shape       string
}

// seedRandomTenant seeds a tenant of the kind with random sizes (seedCodeSpread),
// plants the markers with random shapes, and writes its estimates.
func seedRandomTenant(t *testing.T, env *pgtest.Env, rng *rand.Rand, slug string, kind tenantKind, stats statsMode) *randomTenant {
	t.Helper()
	ctx := context.Background()
	var repos, files, spacing int
	switch kind {
	case kindFew:
		// Up to 320 files a repository: src/ holds enough chunks to be
		// walked in runs rather than checked file by file.
		repos, files, spacing = 2+rng.IntN(5), 120+rng.IntN(201), rng.IntN(2)
	case kindSpread:
		repos, files, spacing = 8+rng.IntN(7), 20+rng.IntN(81), 1+rng.IntN(4)
	case kindMany:
		repos, files, spacing = 65+rng.IntN(8), 2+rng.IntN(5), rng.IntN(2)
	case kindBigOne:
		// 16,500 to 17,500 files: src/ holds over 10,000 of them, fewer
		// after a position some way in; five buckets, so that after a
		// bucket's worth of ids (the least the rest at once is weighed
		// after) more than one is left.
		repos, files, spacing = 1, 16500+rng.IntN(1001), 1
	case kindBigTwo:
		// Two repositories of 5,600 to 6,000 files: src/ holds over 10,000
		// files of both, fewer of one.
		repos, files, spacing = 2, 5600+rng.IntN(401), 1
	}
	tenant, repoIDs := seedCodeSpread(t, env, slug, repos, files, spacing)
	all := referenceChunks(t, env, tenant)
	var markers []string
	for _, m := range randomMarkers {
		idx, desc := markerShape(rng, all)
		ids := make([]int64, len(idx))
		for i, k := range idx {
			ids[i] = all[k].id
		}
		if _, err := env.Admin.Pool.Exec(ctx, `UPDATE code_chunks SET content = content || E'\n' || $3
			WHERE tenant_id = $1 AND id = ANY($2)`, tenant, ids, m+"()"); err != nil {
			t.Fatal(err)
		}
		markers = append(markers, fmt.Sprintf("%s: %s, %d chunks", strings.ToLower(m), desc, len(ids)))
	}
	n := int64(len(all))
	switch stats {
	case statsRefresh:
		refreshCodeStats(t, env, tenant)
	case statsForgeCommon:
		var grams []string
		for _, w := range append(slices.Clone(randomMarkers), seedWords...) {
			grams = append(grams, literalTrigrams(w)...)
		}
		forgeCodeStats(t, env, tenant, everyChunk(max(n, 100000), grams...))
	case statsForgeRandom:
		est := map[string]int64{"": n * []int64{1, 10}[rng.IntN(2)]}
		for _, w := range append(slices.Clone(randomMarkers), seedWords...) {
			for _, g := range literalTrigrams(w) {
				if c := []int64{-1, 1, n / 1000, n / 20, n / 2, n}[rng.IntN(6)]; c >= 0 {
					est[g] = c
				}
			}
		}
		forgeCodeStats(t, env, tenant, est)
	}
	all = referenceChunks(t, env, tenant)
	tn := &randomTenant{id: tenant, repos: repoIDs, all: all, first: map[int64]int64{}, last: map[int64]int64{}}
	for _, c := range all {
		if _, ok := tn.first[c.repo]; !ok {
			tn.first[c.repo] = c.id
		}
		tn.last[c.repo] = c.id
	}
	tn.shape = fmt.Sprintf("%s (%s): %d repositories of %d files, spacing %d buckets, %d chunks, ids %d..%d (buckets %d..%d), %s; markers %s",
		slug, kind, repos, files, spacing, len(all), all[0].id, all[len(all)-1].id, all[0].id/spanBucket, all[len(all)-1].id/spanBucket,
		stats, strings.Join(markers, "; "))
	return tn
}

// markerShape draws where a marker goes: the indexes (into all, in order)
// of the chunks it is planted in, and a description.
func markerShape(rng *rand.Rand, all []refChunk) (idx []int, desc string) {
	n := len(all)
	in := make([]bool, n)
	switch rng.IntN(5) {
	case 0:
		p := []float64{0.3, 0.05, 0.005, 0.0005}[rng.IntN(4)]
		for i := range in {
			in[i] = rng.Float64() < p
		}
		desc = fmt.Sprintf("uniform %g", p)
	case 1:
		// Clusters, from a few dozen chunks to over a bucket's worth,
		// with long empty stretches between them.
		k := 1 + rng.IntN(3)
		var parts []string
		for range k {
			length := int(16 * math.Pow(float64(min(n, 10000))/16, rng.Float64()))
			start := rng.IntN(n)
			p := []float64{1, 0.5, 0.1}[rng.IntN(3)]
			for i := start; i < min(n, start+length); i++ {
				in[i] = rng.Float64() < p
			}
			parts = append(parts, fmt.Sprintf("%d chunks from id %d at %g", length, all[start].id, p))
		}
		desc = "clusters of " + strings.Join(parts, ", ")
	case 2:
		// Dense at first, then a few stragglers far on (seedCodeThin).
		start, length := rng.IntN(n), 8+rng.IntN(113)
		for i := start; i < min(n, start+length); i++ {
			in[i] = rng.IntN(4) != 3
		}
		for range 1 + rng.IntN(3) {
			in[start+rng.IntN(n-start)] = true
		}
		desc = fmt.Sprintf("thinning after %d chunks from id %d", length, all[start].id)
	case 3:
		// At the borders of buckets or sub-buckets, where a step hands
		// over to the next.
		span := []int64{spanSub, spanBucket}[rng.IntN(2)]
		for i, c := range all {
			in[i] = (c.id+2)%span < 4 && rng.IntN(10) < 7
		}
		desc = fmt.Sprintf("at borders of %d ids", span)
	case 4:
		for range 1 + rng.IntN(4) {
			in[rng.IntN(n)] = true
		}
		desc = "rare"
	}
	if rng.IntN(5) < 2 {
		// And at a few random sub-bucket borders (a bucket's among
		// them) too.
		for i, c := range all {
			if (c.id+1)%spanSub < 2 && rng.IntN(8) == 0 {
				in[i] = true
			}
		}
		desc += ", some sub-bucket borders"
	}
	for i, ok := range in {
		if ok {
			idx = append(idx, i)
		}
	}
	return idx, desc
}

// literalTrigrams are the trigrams of a literal as the estimates count them:
// those of its runs of ASCII letters and digits, lowered.
func literalTrigrams(lit string) []string {
	var out []string
	for _, run := range regexp.MustCompile(`[a-z0-9]{3,}`).FindAllString(strings.ToLower(lit), -1) {
		for i := 0; i+3 <= len(run); i++ {
			out = append(out, run[i:i+3])
		}
	}
	return out
}

// randomQuery is one query and how far to page it.
type randomQuery struct {
	// n is its number among the tenant's queries.
	n       int
	repos   []int64
	repoSet string
	// pats must all be in a chunk, and one of alt (when any).
	pats []string
	alt  []string
	f    filter
	// given says how the patterns were passed.
	given  string
	prefix string
	after  int64
	from   string
	limit  int
	pages  int
}

const (
	patternKinds  = 8
	repoKinds     = 5
	positionKinds = 6
)

// randomQuery draws query q of the tenant: the kind of each of its
// repository set, patterns and position cycles with q (so that a few
// queries already hold every kind), the rest is random.
func (tn *randomTenant) randomQuery(t *testing.T, rng *rand.Rand, q int) randomQuery {
	t.Helper()
	rq := randomQuery{n: q}
	rq.repos, rq.repoSet = tn.randomRepos(rng, q%repoKinds)
	marker := func() string { return strings.ToLower(randomMarkers[rng.IntN(len(randomMarkers))]) }
	twoMarkers := func() []string {
		i, j := rng.IntN(len(randomMarkers)), rng.IntN(len(randomMarkers)-1)
		if j >= i {
			j++
		}
		return []string{strings.ToLower(randomMarkers[i]), strings.ToLower(randomMarkers[j])}
	}
	word := func() string { return seedWords[rng.IntN(len(seedWords))] }
	shuffled := func(p []string) []string {
		rng.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
		return p
	}
	switch q % patternKinds {
	case 0:
		rq.pats, rq.given = []string{marker()}, "one marker"
	case 1:
		rq.pats, rq.given = twoMarkers(), "two markers"
	case 2:
		rq.pats, rq.given = []string{word()}, "a seeded word"
	case 3:
		rq.pats, rq.given = shuffled([]string{marker(), word()}), "a marker and a seeded word"
	case 4:
		if rng.IntN(2) == 0 {
			rq.pats, rq.given = []string{absentWord}, "absent"
		} else {
			rq.pats, rq.given = shuffled([]string{marker(), absentWord}), "a marker and an absent word"
		}
	case 5:
		// A regex with no literal: an alternation (the trigram index
		// takes it as its condition), alone or with a pattern.
		if rng.IntN(2) == 0 {
			rq.alt = twoMarkers()
		} else {
			rq.alt = shuffled([]string{marker(), word()})
		}
		rq.given = "an alternation as a regex"
		if rng.IntN(3) == 0 {
			rq.pats = []string{[]string{"func f", "common", marker()}[rng.IntN(3)]}
			rq.given += ", and a pattern"
		}
	case 6:
		// A pattern and a regex: the literals, then the ARE, on the rows.
		p := shuffled(append(twoMarkers(), word()))[:2]
		rq.pats, rq.given = p, "a pattern and a literal regex"
		rq.f = filter{likes: likes(p[:1]), regex: literalARE(t, p[1])}
	case 7:
		rq.given = "no pattern"
	}
	// The path prefix: none, a broad one, or a random cut of a path of
	// the repositories (from "s" to one file).
	switch r := rng.IntN(20); {
	case r < 10:
	case r < 13:
		rq.prefix = "src/"
	case r < 14:
		rq.prefix = "doc/"
	default:
		rq.prefix = tn.randomCut(rng, rq.repos)
	}
	if rq.pats == nil && rq.alt == nil && rq.prefix == "" && len(rq.repos) > 1 {
		// Refused before the database unless scoped (checkCandidatesPages).
		rq.prefix = tn.randomCut(rng, rq.repos)
	}
	switch {
	case rq.f.likes != nil || rq.f.regex != "":
	case rq.alt != nil:
		rq.f = filter{likes: likes(rq.pats), regex: alternationARE(t, rq.alt)}
	default:
		fs := filtersFor(t, rq.pats)
		rq.f = fs[rng.IntN(len(fs))]
		if rq.f.regex != "" {
			rq.given += ", as a regex alone"
		}
	}
	if rng.IntN(2) == 0 {
		rq.limit = []int{1, 2, 3, 5, 8, 13, 31, 32, 33, 45, 55, 64}[rng.IntN(12)]
	} else {
		rq.limit = 1 + rng.IntN(200)
	}
	rq.pages = 1 + rng.IntN(6)
	if rng.IntN(4) == 0 {
		rq.pages = 40
	}
	rq.after, rq.from = tn.randomPosition(rng, q%positionKinds, rq.reference(tn.all))
	return rq
}

// randomRepos draws a repository set of the kind: one, a few, all, all but
// one, or as many as get per-repository windows (64) and one more.
func (tn *randomTenant) randomRepos(rng *rand.Rand, kind int) ([]int64, string) {
	n := len(tn.repos)
	perm := rng.Perm(n)
	pick := func(k int) []int64 {
		out := make([]int64, k)
		for i := range k {
			out[i] = tn.repos[perm[i]]
		}
		return out
	}
	switch {
	case kind == 0 || n == 1:
		return pick(1), "one"
	case kind == 1:
		k := 2 + rng.IntN(min(4, n-1))
		return pick(min(k, n)), "a few"
	case kind == 2:
		return slices.Clone(tn.repos), "all"
	case kind == 3:
		return pick(n - 1), "all but one"
	case n > 64:
		k := 64 + rng.IntN(2)
		return pick(k), "the windows' limit"
	default:
		return pick(max(1, n/2)), "half"
	}
}

// randomCut is a random non-empty beginning of the path of a random chunk
// of the repositories.
func (tn *randomTenant) randomCut(rng *rand.Rand, repos []int64) string {
	for {
		c := tn.all[rng.IntN(len(tn.all))]
		if slices.Contains(repos, c.repo) {
			return c.path[:1+rng.IntN(len(c.path))]
		}
	}
}

// randomPosition draws a position of the kind: the start; around a bucket
// or a sub-bucket boundary (of a match, or of any chunk); at or just
// before a match; a random chunk's; just before or at the end of a
// repository.
func (tn *randomTenant) randomPosition(rng *rand.Rand, kind int, want []int64) (int64, string) {
	anyID := func() int64 {
		if len(want) > 0 && rng.IntN(2) == 0 {
			return want[rng.IntN(len(want))]
		}
		return tn.all[rng.IntN(len(tn.all))].id
	}
	switch kind {
	case 1, 2:
		span := int64(spanBucket)
		if kind == 2 {
			span = spanSub
		}
		b := (anyID()/span + int64(rng.IntN(2))) * span
		d := int64(rng.IntN(7) - 3)
		return b + d, fmt.Sprintf("boundary of %d ids %d%+d", span, b, d)
	case 3:
		if len(want) == 0 {
			break
		}
		d := int64(rng.IntN(2))
		return want[rng.IntN(len(want))] - d, fmt.Sprintf("a match -%d", d)
	case 4:
		return anyID(), "a chunk"
	case 5:
		r := tn.repos[rng.IntN(len(tn.repos))]
		if rng.IntN(2) == 0 {
			return tn.first[r] - 1, "before a repository"
		}
		return tn.last[r], "end of a repository"
	}
	return 0, "the start"
}

// reference is the query's answer from the start: matching, or for an
// alternation the union of matching for each of its literals.
func (rq randomQuery) reference(all []refChunk) []int64 {
	if rq.alt == nil {
		return matching(all, rq.repos, rq.pats, rq.prefix)
	}
	var want []int64
	for _, a := range rq.alt {
		want = append(want, matching(all, rq.repos, append(slices.Clone(rq.pats), a), rq.prefix)...)
	}
	slices.Sort(want)
	return slices.Compact(want)
}

func (rq randomQuery) String() string {
	repos := fmt.Sprintf("%s (%d repositories)", rq.repoSet, len(rq.repos))
	if len(rq.repos) <= 8 {
		repos = fmt.Sprintf("%s %v", rq.repoSet, rq.repos)
	}
	return fmt.Sprintf("#%d: repos %s, %s: patterns %q alt %q as likes %q regex %q, prefix %q, after %d (%s), limit %d",
		rq.n, repos, rq.given, rq.pats, rq.alt, rq.f.likes, rq.f.regex, rq.prefix, rq.after, rq.from, rq.limit)
}

// checkRandomQuery pages through the query from its position, up to its
// number of pages, and compares each page with the reference's next ids;
// it reports the first page that differs and returns false.
func checkRandomQuery(t *testing.T, env *pgtest.Env, tn *randomTenant, rq randomQuery, ph *phaseCounter) bool {
	t.Helper()
	want := rq.reference(tn.all)
	after := rq.after
	for page := 1; page <= rq.pages; page++ {
		i, _ := slices.BinarySearch(want, after+1)
		next := want[i:min(len(want), i+rq.limit)]
		cands, err := env.App.Tenant(tn.id).SearchCandidates(context.Background(), rq.repos, rq.f.likes, rq.f.regex, rq.prefix, after, rq.limit)
		if err != nil {
			t.Errorf("tenant %s\nquery %v, page %d (after %d): %v", tn.shape, rq, page, after, err)
			return false
		}
		got := make([]int64, len(cands))
		for k, c := range cands {
			got[k] = c.ChunkID
		}
		if !slices.Equal(got, next) {
			d := 0
			for d < min(len(got), len(next)) && got[d] == next[d] {
				d++
			}
			t.Errorf("tenant %s\nquery %v, page %d (after %d): got %d ids %v…, want %d %v… (the first difference at %d: got %v, want %v; %d matches in all)",
				tn.shape, rq, page, after, len(got), head(got), len(next), head(next), d, head(got[d:]), head(next[d:]), len(want))
			return false
		}
		if ph != nil {
			ph.count(t, tn.id, rq, after)
		}
		if len(got) < rq.limit {
			return true
		}
		after = got[len(got)-1]
	}
	return true
}

// alternationARE is the regex prefilter of a case-insensitive alternation
// of literals, which selects exactly the chunks that hold one of them.
func alternationARE(t *testing.T, lits []string) string {
	t.Helper()
	quoted := make([]string, len(lits))
	for i, l := range lits {
		quoted[i] = regexp.QuoteMeta(l)
	}
	re, err := syntax.Parse("(?i)(?:"+strings.Join(quoted, "|")+")", syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	are, exact, ok := codeindex.ARE(re)
	if !ok || !exact {
		t.Fatalf("no exact ARE for %q", lits)
	}
	return are
}

// phaseCounter tallies the phases of search_code_candidates that pages
// went through, from the plans of their statements (explainConn).
type phaseCounter struct {
	conn  *pgx.Conn
	plans *[]string
	seen  map[string]int
}

// count asks the page again with its plans logged and counts each phase
// its statements show once.
func (ph *phaseCounter) count(t *testing.T, tenant string, rq randomQuery, after int64) {
	t.Helper()
	var regex any // NULL
	if rq.f.regex != "" {
		regex = rq.f.regex
	}
	all := planOf(t, ph.conn, ph.plans, tenant, `SELECT chunk_id FROM search_code_candidates($1, $2, $3, $4, $5, $6)`,
		rq.repos, append([]string{}, rq.f.likes...), rq.prefix, after, rq.limit, regex)
	phases := map[string]bool{}
	for _, stmt := range strings.Split(all, "Query Text: ")[1:] {
		switch {
		case strings.HasPrefix(stmt, "WITH f AS MATERIALIZED"):
			phases["files first"] = true
		case strings.HasPrefix(stmt, "WITH s AS (SELECT f.repository_id AS rid"):
			phases["prefix runs read"] = true
		case strings.HasPrefix(stmt, "WITH w AS MATERIALIZED") && strings.Contains(stmt, "unnest($12::bigint[]"):
			phases["window in runs"] = true
		case strings.HasPrefix(stmt, "WITH w AS MATERIALIZED") && strings.Contains(stmt, "unnest($2) AS g(rid)"):
			phases["window per repository"] = true
		case strings.HasPrefix(stmt, "WITH w AS MATERIALIZED"):
			phases["window of an id range"] = true
		case strings.HasPrefix(stmt, "WITH RECURSIVE w(i, n, ids)") && strings.Contains(stmt, "id >> 10) = ("):
			phases["walk of sub-buckets"] = true
		case strings.HasPrefix(stmt, "WITH RECURSIVE w(i, n, ids)"):
			phases["walk of buckets"] = true
		case strings.HasPrefix(stmt, "WITH s AS MATERIALIZED") && strings.Contains(stmt, "id >> 10) = '"):
			phases["sub-bucket"] = true
		case strings.HasPrefix(stmt, "WITH s AS MATERIALIZED") && strings.Contains(stmt, "id >> 13) = '"):
			phases["bucket"] = true
		case strings.HasPrefix(stmt, "WITH s AS MATERIALIZED"):
			phases["rest at once"] = true
		}
		if strings.HasPrefix(stmt, "WITH s AS MATERIALIZED") || strings.HasPrefix(stmt, "WITH RECURSIVE w(i, n, ids)") {
			if strings.Contains(stmt, "c.repository_id = $2[1]") {
				phases["own key"] = true
			}
			if strings.Contains(stmt, "ILIKE $8[") {
				phases["rarest trigrams"] = true
			}
		}
	}
	if phases["prefix runs read"] && !phases["files first"] && !phases["window in runs"] &&
		(phases["window per repository"] || phases["window of an id range"]) {
		phases["prefix checked on the rows"] = true
	}
	if len(phases) == 0 {
		phases["next chunks, or nothing"] = true
	}
	for p := range phases {
		ph.seen[p]++
	}
}
