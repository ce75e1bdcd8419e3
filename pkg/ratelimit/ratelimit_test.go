package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"
)

func TestMemoryBudget(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	m := NewMemory()
	m.now = func() time.Time { return now }
	rule := Rule{Limit: 120, Period: time.Minute}
	ctx := context.Background()
	for i := 0; i < 120; i++ {
		d, _ := m.Allow(ctx, "token-a", rule)
		if !d.Allowed {
			t.Fatalf("request %d refused", i+1)
		}
		if d.Remaining != 119-i {
			t.Fatalf("request %d: remaining %d, want %d", i+1, d.Remaining, 119-i)
		}
	}
	d, _ := m.Allow(ctx, "token-a", rule)
	if d.Allowed || d.RetryAfter != 500*time.Millisecond {
		t.Fatalf("121st request: %+v, want refused with retry after 500ms", d)
	}
	// Another key has its own budget.
	if d, _ := m.Allow(ctx, "token-b", rule); !d.Allowed {
		t.Fatal("a second key was limited by the first")
	}
	// Half a second later one more request fits, and no more.
	now = now.Add(500 * time.Millisecond)
	if d, _ := m.Allow(ctx, "token-a", rule); !d.Allowed {
		t.Fatal("refused after waiting Retry-After")
	}
	if d, _ := m.Allow(ctx, "token-a", rule); d.Allowed {
		t.Fatal("allowed a second request after one interval")
	}
	// A full period later the whole budget is back.
	now = now.Add(time.Minute)
	for i := 0; i < 120; i++ {
		if d, _ := m.Allow(ctx, "token-a", rule); !d.Allowed {
			t.Fatalf("after a period, request %d refused", i+1)
		}
	}
}

func TestZeroRuleAllows(t *testing.T) {
	d, _ := NewMemory().Allow(context.Background(), "k", Rule{})
	if !d.Allowed {
		t.Fatal("a rule with no limit refused a request")
	}
}

// redisURL is the Redis the tests use: REDIS_URL or the local server.
func redisURL() string {
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// TestRedisSharedBudget: two limiters (two replicas) on one Redis enforce
// one budget per key.
func TestRedisSharedBudget(t *testing.T) {
	ctx := context.Background()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "clt-test-" + hex.EncodeToString(b) + ":"
	r1, err := NewRedis(ctx, redisURL(), prefix)
	if err != nil {
		t.Fatalf("Redis is required for this test: %v", err)
	}
	defer r1.Close()
	r2, err := NewRedis(ctx, redisURL(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	t.Cleanup(func() {
		r1.client.Del(ctx, prefix+"token-a", prefix+"token-b")
	})
	rule := Rule{Limit: 10, Period: time.Minute}
	allowed := 0
	for i := 0; i < 20; i++ {
		l := r1
		if i%2 == 1 {
			l = r2
		}
		d, err := l.Allow(ctx, "token-a", rule)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		} else if d.RetryAfter <= 0 || d.RetryAfter > 6*time.Second {
			t.Errorf("refused with RetryAfter %v, want (0, 6s]", d.RetryAfter)
		}
	}
	if allowed != 10 {
		t.Errorf("two replicas allowed %d of 20 requests, want 10", allowed)
	}
	if d, _ := r2.Allow(ctx, "token-b", rule); !d.Allowed {
		t.Error("another key was limited")
	}
	// The key expires once its budget is full again.
	ttl := r1.client.PTTL(ctx, prefix+"token-a").Val()
	if ttl <= 0 || ttl > time.Minute+time.Second {
		t.Errorf("key TTL %v, want within a period", ttl)
	}
}
