package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// gcraScript applies GCRA atomically in Redis. Time comes from Redis
// (TIME), so replicas with skewed clocks still share one budget.
// KEYS[1]: key. ARGV: interval µs, burst µs. Returns {allowed, retry_after µs, remaining}.
var gcraScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local iv = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local new_tat = tat + iv
local allow_at = new_tat - burst
if now < allow_at then
  return {0, allow_at - now, 0}
end
redis.call('SET', KEYS[1], new_tat, 'PX', math.ceil((new_tat - now) / 1000) + 1)
return {1, 0, math.floor((burst - (new_tat - now)) / iv)}
`)

// Redis is a Limiter whose state lives in Redis, shared by all replicas.
type Redis struct {
	client *redis.Client
	prefix string
}

// NewRedis connects to url (redis://…) and checks that Redis answers.
func NewRedis(ctx context.Context, url, prefix string) (*Redis, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL is not a valid Redis URL: %w", err)
	}
	// Limits are on the request path: fail fast rather than queue.
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = time.Second, 250*time.Millisecond, 250*time.Millisecond
	opts.MaxRetries = 1
	c := redis.NewClient(opts)
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("cannot reach Redis: %w", err)
	}
	return &Redis{client: c, prefix: prefix}, nil
}

// Close closes the client.
func (r *Redis) Close() error { return r.client.Close() }

// Allow implements Limiter.
func (r *Redis) Allow(ctx context.Context, key string, rule Rule) (Decision, error) {
	if rule.Limit <= 0 || rule.Period <= 0 {
		return Decision{Allowed: true}, nil
	}
	res, err := gcraScript.Run(ctx, r.client, []string{r.prefix + key},
		rule.interval().Microseconds(), rule.Period.Microseconds()).Int64Slice()
	if err != nil {
		return Decision{}, err
	}
	return Decision{Allowed: res[0] == 1, RetryAfter: time.Duration(res[1]) * time.Microsecond, Remaining: int(res[2])}, nil
}
