package githubapp

import (
	lru "container/list"
	"net/http"
	"sync"
)

// maxETagBytes bounds the answers an App keeps for conditional requests.
// An hourly sync of a large organisation asks mostly for pages that have
// not changed (collaborators, reviews, review comments); with the page
// kept, GitHub answers 304 Not Modified, which does not count against the
// installation's rate limit.
const maxETagBytes = 64 << 20

// etagCache remembers, per installation and URL, the last 200 answer that
// carried an ETag: its body and its Link header (the next page). It is in
// memory only: a restarted worker pays one full sync, then is cheap again.
// The least recently used entries go first when it is full.
type etagCache struct {
	mu    sync.Mutex
	max   int
	size  int
	order *lru.List // of *etagEntry, most recent at the front
	byKey map[string]*lru.Element
}

type etagEntry struct {
	key, etag, link string
	body            []byte
}

func newETagCache(max int) *etagCache {
	return &etagCache{max: max, order: lru.New(), byKey: map[string]*lru.Element{}}
}

// get returns the remembered answer for key.
func (c *etagCache) get(key string) (etag, link string, body []byte, ok bool) {
	if c == nil {
		return "", "", nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return "", "", nil, false
	}
	c.order.MoveToFront(el)
	e := el.Value.(*etagEntry)
	return e.etag, e.link, e.body, true
}

// put remembers a 200 answer with an ETag, or forgets key when the answer
// has none (a weak ETag is fine: GitHub's are weak and compared weakly).
func (c *etagCache) put(key string, h http.Header, body []byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.size -= len(el.Value.(*etagEntry).body)
		c.order.Remove(el)
		delete(c.byKey, key)
	}
	etag := h.Get("ETag")
	if etag == "" || len(body) > c.max/8 {
		return
	}
	e := &etagEntry{key: key, etag: etag, link: h.Get("Link"), body: body}
	c.byKey[key] = c.order.PushFront(e)
	c.size += len(body)
	for c.size > c.max {
		last := c.order.Back()
		old := last.Value.(*etagEntry)
		c.order.Remove(last)
		delete(c.byKey, old.key)
		c.size -= len(old.body)
	}
}
