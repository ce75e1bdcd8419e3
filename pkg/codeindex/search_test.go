package codeindex

import (
	"context"
	"errors"
	"fmt"
	"go/build"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when told to; contexts it made end
// (synchronously, inside Advance) when it passes their deadline.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at     time.Time
	cancel context.CancelFunc
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) WithDeadline(ctx context.Context, d time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !d.After(c.now) {
		cancel()
	} else {
		c.timers = append(c.timers, fakeTimer{at: d, cancel: cancel})
	}
	return ctx, cancel
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []context.CancelFunc
	keep := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			due = append(due, t.cancel)
		} else {
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	for _, cancel := range due {
		cancel()
	}
}

// fakeSource serves chunks from memory as the database does: in chunk id
// order, after a chunk id, per phase. round, when set, runs at the start
// of every call (0-based) and may fail it.
type fakeSource struct {
	phases map[int][]Candidate
	round  func(ctx context.Context, n int) error
	calls  []string
	limits []int
}

func (s *fakeSource) Candidates(ctx context.Context, phase int, after int64, limit int) ([]Candidate, error) {
	n := len(s.calls)
	s.calls = append(s.calls, fmt.Sprintf("p%d>%d", phase, after))
	s.limits = append(s.limits, limit)
	if s.round != nil {
		if err := s.round(ctx, n); err != nil {
			return nil, err
		}
	}
	var out []Candidate
	for _, c := range s.phases[phase] {
		if c.ChunkID > after && len(out) < limit {
			out = append(out, c)
		}
	}
	return out, nil
}

// chunked chunks lines as the indexer does, with chunk ids from firstID.
func chunked(path string, lines []string, firstID int64) []Candidate {
	var out []Candidate
	for i, ch := range Chunks(lines) {
		out = append(out, Candidate{ChunkID: firstID + int64(i), FullName: "acme/app", Commit: "c0ffee", Path: path,
			StartLine: ch.StartLine, EndLine: ch.EndLine, LineCount: len(lines), Content: ch.Content})
	}
	return out
}

// needleLines is n lines; every line whose number is a multiple of every
// holds "needle".
func needleLines(n, every int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("line %d", i+1)
		if (i+1)%every == 0 {
			lines[i] += " needle"
		}
	}
	return lines
}

func literalPlan(t *testing.T, q string) Plan {
	t.Helper()
	p, err := NewPlan(q, false, false)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type found struct {
	Path string
	Line int
}

func foundOf(ms []Match) []found {
	out := make([]found, len(ms))
	for i, m := range ms {
		out[i] = found{m.Path, m.Line}
	}
	return out
}

// TestSearchOwnsEachLineOnce: chunks overlap, yet every matching line is
// shown exactly once, with its own file's context and line numbers, in
// file order — including lines in the overlap of two chunks and the last
// chunk of a file.
func TestSearchOwnsEachLineOnce(t *testing.T) {
	t.Parallel()
	a, b := needleLines(130, 1), needleLines(7, 1)
	src := &fakeSource{phases: map[int][]Candidate{0: append(chunked("a.go", a, 1), chunked("b.go", b, 100)...)}}
	res, err := Searcher{Clock: newFakeClock()}.Search(context.Background(), src, Query{Plan: literalPlan(t, "needle"), Limit: 1000, Context: 1})
	if err != nil {
		t.Fatal(err)
	}
	var want []found
	for n := 1; n <= 130; n++ {
		want = append(want, found{"a.go", n})
	}
	for n := 1; n <= 7; n++ {
		want = append(want, found{"b.go", n})
	}
	if got := foundOf(res.Matches); !reflect.DeepEqual(want, got) {
		t.Fatalf("matches\n got %v\nwant %v", got, want)
	}
	if res.More || res.Truncated {
		t.Errorf("More %v Truncated %v at the end of the index", res.More, res.Truncated)
	}
	m := res.Matches[49] // line 50: in the overlap of a.go's first two chunks
	if m.Text != "line 50 needle" || m.Snippet != "49: line 49 needle\n50> line 50 needle\n51: line 51 needle" {
		t.Errorf("line 50: text %q snippet %q", m.Text, m.Snippet)
	}
	if last := res.Matches[len(res.Matches)-1]; last.Snippet != "6: line 6 needle\n7> line 7 needle" {
		t.Errorf("last line's snippet %q", last.Snippet)
	}
}

// TestSearchPagesExactlyOnce: following More from page to page visits
// every match once, whatever the page size, and a page ends at the chunk
// and line of its last match (a chunk can hold matches of two pages).
func TestSearchPagesExactlyOnce(t *testing.T) {
	t.Parallel()
	lines := needleLines(400, 3)
	src := &fakeSource{phases: map[int][]Candidate{0: chunked("x.go", lines, 1)}}
	var want []found
	for n := 3; n <= 400; n += 3 {
		want = append(want, found{"x.go", n})
	}
	for _, limit := range []int{1, 7, 20, 133, 500} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			var got []found
			q := Query{Plan: literalPlan(t, "needle"), Limit: limit}
			for page := 0; ; page++ {
				if page > len(want) {
					t.Fatal("paging does not end")
				}
				res, err := Searcher{Clock: newFakeClock(), Batch: 4}.Search(context.Background(), src, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Matches) > limit {
					t.Fatalf("%d matches on a page of %d", len(res.Matches), limit)
				}
				got = append(got, foundOf(res.Matches)...)
				if !res.More {
					break
				}
				last := res.Matches[len(res.Matches)-1]
				if res.Next != last.Pos || last.Pos.Line != last.Line {
					t.Fatalf("Next %+v, last match %+v", res.Next, last)
				}
				q.From = res.Next
			}
			if !reflect.DeepEqual(want, got) {
				t.Errorf("pages\n got %v\nwant %v", got, want)
			}
		})
	}
}

// TestSearchBudgetTruncates: when the wall-time budget or the rounds run
// out before the index does, the answer is what was found and a position
// after the last chunk scanned — never an error — and continuing from it
// finds the rest.
func TestSearchBudgetTruncates(t *testing.T) {
	t.Parallel()
	lines := needleLines(1000, 10) // chunks of 50 lines, step 40: about 25 chunks
	chunks := chunked("big.go", lines, 1)
	for _, tc := range []struct {
		name string
		s    func(*fakeClock) Searcher
		tick time.Duration
		// rounds is how many rounds the first page reads.
		rounds int
	}{
		{"wall time", func(c *fakeClock) Searcher { return Searcher{Clock: c, Batch: 2, Budget: time.Second} }, 300 * time.Millisecond, 4},
		{"rounds", func(c *fakeClock) Searcher { return Searcher{Clock: c, Batch: 2, MaxRounds: 3} }, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			src := &fakeSource{phases: map[int][]Candidate{0: chunks}, round: func(context.Context, int) error { clock.Advance(tc.tick); return nil }}
			q := Query{Plan: literalPlan(t, "needle"), Limit: 1000}
			res, err := tc.s(clock).Search(context.Background(), src, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(src.calls) != tc.rounds {
				t.Errorf("rounds %v, want %d", src.calls, tc.rounds)
			}
			lastScanned := chunks[2*tc.rounds-1]
			if !res.Truncated || res.More || res.Next != (Pos{Chunk: lastScanned.ChunkID + 1}) {
				t.Fatalf("Truncated %v More %v Next %+v; want a position after chunk %d", res.Truncated, res.More, res.Next, lastScanned.ChunkID)
			}
			_, owned := Owned(lastScanned.StartLine, lastScanned.EndLine, lastScanned.LineCount)
			if n := len(res.Matches); n != owned/10 {
				t.Errorf("%d matches, want the %d of the chunks scanned", n, owned/10)
			}
			all := res.Matches
			for page := 0; res.Truncated; page++ {
				if page > len(chunks) {
					t.Fatal("continuing does not end")
				}
				q.From = res.Next
				if res, err = tc.s(newFakeClock()).Search(context.Background(), src, q); err != nil {
					t.Fatal(err)
				}
				all = append(all, res.Matches...)
			}
			if len(all) != 100 || all[99].Line != 1000 {
				t.Errorf("%d matches over all pages, want 100 ending at line 1000", len(all))
			}
		})
	}
}

// TestSearchDeadlineStopsTheRoundInProgress: the deadline ends the context
// of the query that is running, not only the loop between rounds. A round
// after the first that is stopped answers with the earlier rounds and a
// position; a first round that is stopped has nothing to show and says the
// search took too long; the caller's own cancellation stays an error.
func TestSearchDeadlineStopsTheRoundInProgress(t *testing.T) {
	t.Parallel()
	lines := needleLines(1000, 10)
	chunks := chunked("big.go", lines, 1)
	// stall makes round n take past the deadline: the clock moves 5 s
	// while the query runs, and the query returns when its context ends.
	stall := func(clock *fakeClock, n int) func(context.Context, int) error {
		return func(ctx context.Context, i int) error {
			if i != n {
				return nil
			}
			clock.Advance(5 * time.Second)
			select {
			case <-ctx.Done():
				return fmt.Errorf("query: %w", ctx.Err())
			default:
				return nil // nothing stopped it: the query finishes, late
			}
		}
	}

	t.Run("later round", func(t *testing.T) {
		clock := newFakeClock()
		src := &fakeSource{phases: map[int][]Candidate{0: chunks}, round: stall(clock, 2)}
		res, err := Searcher{Clock: clock, Batch: 2}.Search(context.Background(), src, Query{Plan: literalPlan(t, "needle"), Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Truncated || res.Next != (Pos{Chunk: chunks[3].ChunkID + 1}) {
			t.Errorf("Truncated %v Next %+v; want a position after the second round's chunks", res.Truncated, res.Next)
		}
		if len(res.Matches) == 0 || res.Matches[len(res.Matches)-1].Pos.Chunk > chunks[3].ChunkID {
			t.Errorf("matches %+v: want those of the first two rounds", foundOf(res.Matches))
		}
	})
	t.Run("statement timeout in a later round", func(t *testing.T) {
		// The database's own statement timeout (ErrSearchTimeout, the
		// deadline not reached) ends a later round like the deadline does.
		src := &fakeSource{phases: map[int][]Candidate{0: chunks}, round: func(_ context.Context, i int) error {
			if i == 2 {
				return ErrSearchTimeout
			}
			return nil
		}}
		res, err := Searcher{Clock: newFakeClock(), Batch: 2}.Search(context.Background(), src, Query{Plan: literalPlan(t, "needle"), Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Truncated || res.Next != (Pos{Chunk: chunks[3].ChunkID + 1}) || len(res.Matches) == 0 {
			t.Errorf("Truncated %v Next %+v matches %d; want the first two rounds' matches and a position after them", res.Truncated, res.Next, len(res.Matches))
		}
	})
	t.Run("first round", func(t *testing.T) {
		clock := newFakeClock()
		src := &fakeSource{phases: map[int][]Candidate{0: chunks}, round: stall(clock, 0)}
		_, err := Searcher{Clock: clock, Batch: 2}.Search(context.Background(), src, Query{Plan: literalPlan(t, "needle"), Limit: 1000})
		if !errors.Is(err, ErrSearchTimeout) {
			t.Errorf("err = %v, want ErrSearchTimeout", err)
		}
	})
	t.Run("caller cancels", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		errDB := errors.New("canceled by the caller")
		src := &fakeSource{phases: map[int][]Candidate{0: chunks}, round: func(_ context.Context, i int) error {
			if i == 1 {
				cancel()
				return errDB
			}
			return nil
		}}
		_, err := Searcher{Clock: newFakeClock(), Batch: 2}.Search(ctx, src, Query{Plan: literalPlan(t, "needle"), Limit: 1000})
		if !errors.Is(err, errDB) {
			t.Errorf("err = %v, want the source's error", err)
		}
	})
	t.Run("database error", func(t *testing.T) {
		errDB := errors.New("relation does not exist")
		src := &fakeSource{phases: map[int][]Candidate{0: chunks}, round: func(context.Context, int) error { return errDB }}
		if _, err := (Searcher{Clock: newFakeClock()}).Search(context.Background(), src, Query{Plan: literalPlan(t, "needle"), Limit: 5}); !errors.Is(err, errDB) {
			t.Errorf("err = %v, want the source's error", err)
		}
	})
}

// TestSearchPullRequestPhases: a pull-request search reads the changed
// files (phase 1) and then the base index from its start (phase 2),
// skipping shadowed chunks, and its positions carry the phase so a page
// that ends in phase 1 continues there and one in phase 2 does not re-read
// phase 1.
func TestSearchPullRequestPhases(t *testing.T) {
	t.Parallel()
	head := chunked("changed.go", []string{"needle head"}, 500)
	base := append(chunked("changed.go", []string{"needle base"}, 1), chunked("kept.go", []string{"x", "needle kept"}, 2)...)
	base[0].Shadowed = true
	src := &fakeSource{phases: map[int][]Candidate{1: head, 2: base}}
	q := Query{Plan: literalPlan(t, "needle"), Limit: 1, Pull: true}
	var got []string
	for range 3 {
		res, err := Searcher{Clock: newFakeClock()}.Search(context.Background(), src, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Matches {
			got = append(got, fmt.Sprintf("%s:%d p%d", m.Path, m.Line, m.Pos.Phase))
		}
		if !res.More {
			break
		}
		q.From = res.Next
	}
	if want := []string{"changed.go:1 p1", "kept.go:2 p2"}; !reflect.DeepEqual(want, got) {
		t.Errorf("matches %v, want %v", got, want)
	}
	if want := "p1>0 p2>0 p1>499 p2>0"; strings.Join(src.calls, " ") != want {
		t.Errorf("rounds %v, want %s", src.calls, want)
	}
	// The base index is a walk of its own: its first round asks for the
	// first round's size, not twice the last phase-1 round's.
	first := FirstRound(q.Limit)
	if want := []int{first, first, first, first}; !reflect.DeepEqual(src.limits, want) {
		t.Errorf("round sizes %v, want %v", src.limits, want)
	}
}

// TestSearchRedactsBeforeClipping: Redact sees the whole stored window of
// a chunk with a match (once per chunk, never for a chunk without one) and
// lines are clipped after it, never inside a placeholder.
func TestSearchRedactsBeforeClipping(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", MaxLineBytes-10) + " key=SECRETVALUE needle"
	lines := []string{"nothing here", long, "plain needle"}
	src := &fakeSource{phases: map[int][]Candidate{0: append(chunked("s.go", lines, 1), chunked("none.go", []string{"no match"}, 2)...)}}
	var calls [][]string
	redact := func(ls []string) []string {
		calls = append(calls, ls)
		out := make([]string, len(ls))
		for i, l := range ls {
			out[i] = strings.ReplaceAll(l, "SECRETVALUE", "[REDACTED:test]")
		}
		return out
	}
	res, err := Searcher{Clock: newFakeClock()}.Search(context.Background(), src, Query{Plan: literalPlan(t, "needle"), Limit: 10, Context: 1, Redact: redact})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || len(calls[0]) != 3 {
		t.Fatalf("Redact called with %d windows, want s.go's only", len(calls))
	}
	if len(res.Matches) != 2 {
		t.Fatalf("matches %+v", foundOf(res.Matches))
	}
	if got := res.Matches[0].Text; got != strings.Repeat("a", MaxLineBytes-10)+" key=…" {
		t.Errorf("clipped line %q: want the placeholder the cut would split left out whole", got)
	}
	if got := res.Matches[1].Snippet; strings.Contains(got, "SECRET") || !strings.Contains(got, "3> plain needle") {
		t.Errorf("snippet %q: want redacted context", got)
	}
}

// TestRoundsGrow: the first round asks for the matches wanted (limit+1)
// and a quarter more, each later round for twice the one before, up to the batch;
// a short round is the end, whatever its size. A regex's rounds are the
// batch from the start (its candidates are looser), unless its prefilter
// in the database is its exact translation (Plan.Tight).
func TestRoundsGrow(t *testing.T) {
	t.Parallel()
	var none []Candidate
	for i := 1; i <= 1000; i++ {
		none = append(none, Candidate{ChunkID: int64(i), FullName: "acme/app", Path: fmt.Sprintf("f%d.go", i), StartLine: 1, EndLine: 1, LineCount: 1, Content: "nothing here"})
	}
	for _, tc := range []struct {
		name   string
		s      Searcher
		chunks []Candidate
		limit  int
		want   []int
	}{
		{"default limit", Searcher{}, none, 20, []int{27, 54, 108, 200, 200, 200, 200, 200}},
		{"large limit", Searcher{}, none[:300], 100, []int{127, 200}},
		{"largest limit starts at the batch", Searcher{}, none[:300], 200, []int{200, 200}},
		{"short first round ends it", Searcher{}, none[:10], 20, []int{27}},
		{"explicit first batch", Searcher{FirstBatch: 5, Batch: 12}, none[:30], 20, []int{5, 10, 12, 12}},
		{"a regex starts at the batch", Searcher{}, none[:500], 20, []int{200, 200, 200}},
		{"an exactly translated regex starts small", Searcher{}, none[:500], 20, []int{27, 54, 108, 200, 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &fakeSource{phases: map[int][]Candidate{0: tc.chunks}}
			tc.s.Clock = newFakeClock()
			plan := literalPlan(t, "needle")
			if strings.HasPrefix(tc.name, "a regex") {
				var err error
				// \b has no exact translation.
				if plan, err = NewPlan(`need+le\b`, true, false); err != nil {
					t.Fatal(err)
				}
			}
			if strings.HasPrefix(tc.name, "an exactly") {
				var err error
				if plan, err = NewPlan(`need+le\(`, true, false); err != nil {
					t.Fatal(err)
				}
			}
			res, err := tc.s.Search(context.Background(), src, Query{Plan: plan, Limit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(src.limits, tc.want) {
				t.Errorf("rounds asked for %v, want %v", src.limits, tc.want)
			}
			if len(res.Matches) != 0 || res.More || res.Truncated {
				t.Errorf("result %+v, want nothing found to the end", res)
			}
		})
	}
}

// BenchmarkSearchConfirm measures the engine's own work on a round of
// candidates (the database's part left out): 27 chunks of the Go tree's
// net/http/ that hold the query's literals, as search_code_candidates
// gives them, confirmed line by line into a page of 20 matches with two
// lines of context. "regexp" runs every line through Plan.Match, as the
// engine did before MatchLine; "literals" is MatchLine, which rules lines
// out by the plan's literals first:
//
//	go test ./pkg/codeindex -run '^$' -bench SearchConfirm
func BenchmarkSearchConfirm(b *testing.B) {
	files, _ := filepath.Glob(filepath.Join(build.Default.GOROOT, "src", "net", "http", "*.go"))
	for _, tc := range []struct {
		name, query string
		regex       bool
	}{{"context.Context", "context.Context", false}, {"Handler-regex", `func \w+Handler\(`, true}} {
		plan, err := NewPlan(tc.query, tc.regex, false)
		if err != nil {
			b.Fatal(err)
		}
		var cands []Candidate
		for _, f := range files {
			body, err := os.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			for _, c := range chunked(f, SplitLines(string(body)), 1) {
				ok := len(cands) < 27
				for _, l := range plan.Literals {
					ok = ok && strings.Contains(strings.ToLower(c.Content), strings.ToLower(l))
				}
				if ok {
					c.ChunkID = int64(len(cands) + 1)
					cands = append(cands, c)
				}
			}
		}
		if len(cands) < 27 {
			b.Fatalf("%s: %d candidates", tc.name, len(cands))
		}
		regexpOnly := plan
		regexpOnly.lineLits = nil
		for _, v := range []struct {
			name string
			plan Plan
		}{{"regexp", regexpOnly}, {"literals", plan}} {
			b.Run(tc.name+"/"+v.name, func(b *testing.B) {
				q := Query{Plan: v.plan, Limit: 20, Context: 2}
				for b.Loop() {
					if _, err := (Searcher{}).Search(context.Background(), &fakeSource{phases: map[int][]Candidate{0: cands}}, q); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
