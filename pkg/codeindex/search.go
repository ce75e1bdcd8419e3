package codeindex

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// Search budgets: candidate chunks fetched per round, rounds per call, the
// wall time after which no new round starts, and the deadline that stops
// the round in progress. A call that spends its budget returns what it
// found with a position to continue from.
//
// Each round is one call of the candidate source (search_code_candidates).
// For a literal the first round asks for the matches wanted (limit+1:
// every candidate of a literal holds it at least once) and a quarter more
// (FirstRound), each later round for twice as many as the one before, up
// to DefaultBatch. So
// does a regular expression whose database prefilter is its exact
// translation (Plan.Regex, Plan.Tight); any other regular expression's
// candidates are looser (7 to 36 per match measured with literals alone),
// so its rounds are DefaultBatch from the start. Since that function
// walks only as far as it must (windows, then one bucket of the span index
// at a time), a small first round costs a fraction of a full one; while
// every round searched the whole tenant, small rounds were dearer, which
// is why the batch used to be fixed at 200 (docs/benchmarks.md, issue 11).
//
// The budget decides between rounds; the deadline is carried by the
// context of every round's query, so a round that starts just inside the
// budget cannot run on for a whole statement timeout: a call ends within
// DefaultDeadline (plus confirming the chunks already fetched).
const (
	DefaultBatch     = 200
	DefaultMaxRounds = 25
	DefaultBudget    = 1500 * time.Millisecond
	DefaultDeadline  = 2 * time.Second
	// MaxLineBytes is the longest line shown whole.
	MaxLineBytes = 500
)

// FirstRound is the candidates a tight plan's first round asks for, for a
// page of limit matches: limit+1 (the one more says whether there are
// more) and a quarter to spare. A chunk that holds the literal shows a
// match unless the literal is only in the lines it shares with a
// neighbour (a fifth of its lines, see ChunkStep), and then the
// neighbour, also a candidate, shows it. Every candidate a round asks for
// past the page's end is found at the database's cost: where matches are
// sparse, the walk rechecks about as many chunks per candidate as there
// are between two matches (twice the page, asked before, cost a seventh
// to a half more at full size on the big tenant's one-repository,
// Handler(, path and alternation cases; docs/benchmarks.md). A round that
// falls short asks again, twice as large; where the rest of the tenant
// holds a little more than a round, that second round costs about as much
// as the first (docs/decisions.md).
func FirstRound(limit int) int {
	return (5*(limit+1) + 3) / 4
}

// ErrSearchTimeout is the answer when the first round of a search (the one
// that would show any progress) could not finish in time: by the database's
// statement timeout or by the deadline. A later round that runs out of
// time ends the search with what was found and a position instead.
var ErrSearchTimeout = codelotse.Errorf(codelotse.Invalid, "The search took longer than 2 seconds and was stopped; narrow it with repository, path or a longer literal.")

// Candidate is one chunk that may match: all its literals occur in it.
type Candidate struct {
	ChunkID      int64
	RepositoryID int64
	FullName     string
	Commit       string
	Path         string
	StartLine    int
	EndLine      int
	LineCount    int
	Content      string
	// Shadowed (pull-request searches only): the chunk is outside the
	// path prefix, or a base-index chunk of a file the pull request
	// changes or deletes. It is returned so paging can move past it.
	Shadowed bool
}

// Source returns candidates in chunk id order: at most limit chunks after
// chunk id after. phase is 0 outside pull-request searches; a pull-request
// search reads phase 1 (its changed files) and then phase 2 (the base index
// beneath them). Fewer than limit candidates means the phase is done. A
// source must give up when ctx ends: that is how the deadline stops the
// round in progress. pkg/mcpserver implements it with pkg/postgres.
type Source interface {
	Candidates(ctx context.Context, phase int, after int64, limit int) ([]Candidate, error)
}

// Clock is the time the budget is measured in. Tests pass a fake one.
type Clock interface {
	Now() time.Time
	// WithDeadline returns ctx ended at deadline (context.WithDeadline
	// on the system clock).
	WithDeadline(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc)
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
func (systemClock) WithDeadline(ctx context.Context, d time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, d)
}

// Pos is a position in a search: the last line shown, or a chunk to start
// at (Line 0). Phase is the pull-request phase (0 outside them).
type Pos struct {
	Chunk int64
	Line  int
	Phase int
}

// Query is one page of a search.
type Query struct {
	Plan Plan
	Path PathFilter
	// Limit is the most matches returned; Context the lines shown before
	// and after each match (up to MaxContext).
	Limit   int
	Context int
	// Pull: the source is a pull request's, read in phases 1 and 2.
	Pull bool
	// From continues a previous page (the zero Pos: from the start).
	From Pos
	// Redact returns a chunk's lines as they may be shown, one for one.
	// It is called once per chunk with a match, before lines are clipped
	// (shortening first could cut a secret so that it is no longer
	// recognised). Nil shows the stored lines.
	Redact func(lines []string) []string
}

// Match is one matching line.
type Match struct {
	Repository string
	Commit     string
	Path       string
	Line       int
	Text       string
	// Snippet is the numbered context ("N: text", "N> text" for the match).
	Snippet string
	// Pos continues the search after this match.
	Pos Pos
}

// Result is one page of matches.
type Result struct {
	Matches []Match
	// More: there are matches after the last one shown (continue from its
	// Pos).
	More bool
	// Truncated: the budget ran out before the index did; continue from
	// Next, the chunk after the last one scanned.
	Truncated bool
	Next      Pos
}

// Searcher runs searches. The zero value uses the system clock and the
// default budgets.
type Searcher struct {
	Clock Clock
	// FirstBatch is the candidates asked for in the first round (0:
	// FirstRound(Limit) for a tight plan, Batch otherwise); each later
	// round asks for twice as many, up to Batch.
	FirstBatch int
	Batch      int
	MaxRounds  int
	Budget     time.Duration
	Deadline   time.Duration
}

// Search reads candidates from src round by round, confirms each line a
// chunk owns (overlapping chunks never show a line twice) with the plan's
// regexp, and stops after Limit matches (reporting More), at the end of the
// index, or when a budget is spent (reporting Truncated, unless nothing
// could be scanned at all: ErrSearchTimeout).
func (s Searcher) Search(ctx context.Context, src Source, q Query) (Result, error) {
	clock := s.Clock
	if clock == nil {
		clock = systemClock{}
	}
	batch := orDefault(s.Batch, DefaultBatch)
	first := batch
	if q.Plan.Tight {
		first = FirstRound(q.Limit)
	}
	firstSize := min(orDefault(s.FirstBatch, first), batch)
	size := firstSize
	maxRounds := orDefault(s.MaxRounds, DefaultMaxRounds)
	budget := orDefault(s.Budget, DefaultBudget)
	deadline := orDefault(s.Deadline, DefaultDeadline)

	start := clock.Now()
	rctx, cancel := clock.WithDeadline(ctx, start.Add(deadline))
	defer cancel()

	from := q.From
	after := from.Chunk - 1 // re-read the position's chunk, skipping lines up to from.Line
	if from.Chunk == 0 {
		after = 0
	}
	phase := from.Phase
	if q.Pull && phase == 0 {
		phase = 1
	}
	shownPhase := func() int {
		if !q.Pull {
			return 0
		}
		return phase
	}
	var matches []Match
	exhausted, spent := false, false
	for round := 0; len(matches) <= q.Limit; round++ {
		if round >= maxRounds || clock.Now().Sub(start) > budget {
			spent = true
			break
		}
		cands, err := src.Candidates(rctx, phase, after, size)
		if err != nil {
			// The deadline, or the database's statement timeout (reported
			// as ErrSearchTimeout), ended this round; anything else is the
			// database failing or the caller giving up.
			timedOut := rctx.Err() != nil || errors.Is(err, ErrSearchTimeout)
			if !timedOut || ctx.Err() != nil {
				return Result{}, err
			}
			if round == 0 {
				return Result{}, ErrSearchTimeout
			}
			// The deadline stopped this round: answer with the rounds
			// before it.
			spent = true
			break
		}
		for _, c := range cands {
			after = c.ChunkID
			if c.Shadowed || !q.Path.Match(c.Path) {
				continue
			}
			matches = appendMatches(matches, c, q, from, phase, shownPhase())
		}
		short := len(cands) < size
		size = min(2*size, batch)
		if short {
			if q.Pull && phase == 1 {
				// The changed files are done; the base index beneath them
				// is next, from its first chunk, with the first round's
				// size again: it is a walk of its own, and a round twice
				// as large costs about twice as much there.
				phase, after, size = 2, 0, firstSize
				continue
			}
			exhausted = true
			break
		}
	}

	res := Result{Matches: matches}
	switch {
	case len(matches) > q.Limit:
		res.Matches, res.More = matches[:q.Limit], true
		res.Next = res.Matches[q.Limit-1].Pos
	case !exhausted && spent:
		res.Truncated = true
		res.Next = Pos{Chunk: after + 1, Phase: shownPhase()}
	}
	return res, nil
}

// appendMatches appends the matching lines c owns, after from.
func appendMatches(matches []Match, c Candidate, q Query, from Pos, phase, shown int) []Match {
	// The stored lines are redacted (pkg/ingest): matching runs on what
	// an agent may see. The lines shown are redacted once more as a
	// window by q.Redact, only for chunks with a match, and clipped only
	// after that.
	stored := strings.Split(c.Content, "\n")
	var lines []string
	lo, hi := Owned(c.StartLine, c.EndLine, c.LineCount)
	for n := lo; n <= hi; n++ {
		if c.ChunkID == from.Chunk && phase == from.Phase && n <= from.Line {
			continue
		}
		if !q.Plan.MatchLine(stored[n-c.StartLine]) {
			continue
		}
		if lines == nil {
			lines = stored
			if q.Redact != nil {
				lines = q.Redact(stored)
			}
		}
		m := Match{Repository: c.FullName, Commit: c.Commit, Path: c.Path, Line: n, Text: clip(lines[n-c.StartLine]),
			Pos: Pos{Chunk: c.ChunkID, Line: n, Phase: shown}}
		if q.Context > 0 {
			var b strings.Builder
			for k := max(c.StartLine, n-q.Context); k <= min(c.EndLine, n+q.Context); k++ {
				mark := ":"
				if k == n {
					mark = ">"
				}
				fmt.Fprintf(&b, "%d%s %s\n", k, mark, clip(lines[k-c.StartLine]))
			}
			m.Snippet = strings.TrimSuffix(b.String(), "\n")
		}
		matches = append(matches, m)
	}
	return matches
}

func orDefault[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// clip shortens very long lines (minified files) for display. It runs only
// on redacted lines (shortening first would cut a token so the redactor no
// longer recognises it and show half of it), and never cuts inside a
// [REDACTED:…] placeholder: a placeholder the cut would split is left out
// whole.
func clip(s string) string {
	if len(s) <= MaxLineBytes {
		return s
	}
	cut := MaxLineBytes
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	const ph = "[REDACTED:"
	if open := strings.LastIndex(s[:min(len(s), cut+len(ph)-1)], ph); open >= 0 && open < cut {
		if end := strings.IndexByte(s[open:], ']'); end < 0 || open+end >= cut {
			cut = open
		}
	}
	return s[:cut] + "…"
}
