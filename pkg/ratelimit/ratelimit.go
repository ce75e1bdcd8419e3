// Package ratelimit limits request rates per key with the generic cell rate
// algorithm (GCRA): a key may make Limit requests per Period, spread or in
// a burst, and a refused request learns exactly when it may retry.
//
// Memory keeps the state in the process; Redis keeps it in Redis so that
// every replica shares one budget. Both implement Limiter. ratelimit is the
// only package that imports go-redis.
package ratelimit

import (
	"context"
	"sync"
	"time"
)

// Rule is a budget: Limit requests per Period.
type Rule struct {
	Limit  int
	Period time.Duration
}

// interval is the time one request "costs".
func (r Rule) interval() time.Duration { return r.Period / time.Duration(r.Limit) }

// Decision is the outcome of one request.
type Decision struct {
	Allowed bool
	// RetryAfter is how long a refused request must wait.
	RetryAfter time.Duration
	// Remaining is how many requests could still be made right now.
	Remaining int
}

// Limiter decides whether a request under key may proceed.
type Limiter interface {
	Allow(ctx context.Context, key string, rule Rule) (Decision, error)
}

// gcra applies one request to the theoretical arrival time tat (zero: none
// yet) at now, and returns the decision and the new tat.
func gcra(tat, now time.Time, rule Rule) (Decision, time.Time) {
	if rule.Limit <= 0 || rule.Period <= 0 {
		return Decision{Allowed: true}, tat
	}
	iv := rule.interval()
	burst := rule.Period // the whole budget may be spent at once
	if tat.Before(now) {
		tat = now
	}
	newTat := tat.Add(iv)
	allowAt := newTat.Add(-burst)
	if now.Before(allowAt) {
		return Decision{Allowed: false, RetryAfter: allowAt.Sub(now)}, tat
	}
	remaining := int((burst - newTat.Sub(now)) / iv)
	return Decision{Allowed: true, Remaining: remaining}, newTat
}

// Memory is a Limiter for one process.
type Memory struct {
	mu    sync.Mutex
	state map[string]time.Time
	now   func() time.Time
	ops   int
}

// NewMemory returns an in-process limiter.
func NewMemory() *Memory { return &Memory{state: map[string]time.Time{}, now: time.Now} }

// Allow implements Limiter.
func (m *Memory) Allow(_ context.Context, key string, rule Rule) (Decision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	d, tat := gcra(m.state[key], now, rule)
	m.state[key] = tat
	// Forget keys whose budget is full again, now and then, so the map
	// holds only active clients.
	if m.ops++; m.ops%4096 == 0 {
		for k, t := range m.state {
			if t.Before(now) {
				delete(m.state, k)
			}
		}
	}
	return d, nil
}
