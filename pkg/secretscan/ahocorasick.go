package secretscan

// matcher is an Aho-Corasick automaton over ASCII case-folded bytes, compiled
// to a dense transition table over byte classes, so that one pass over a
// string finds every occurrence (overlapping ones included) of every pattern.
type matcher struct {
	class   [256]uint8 // byte -> class; 0 for bytes in no pattern
	nclass  int
	delta   []int32 // state*nclass + class -> state
	outs    [][]int32
	hasOut  []bool
	patLens []int32
}

// hit is one occurrence of pattern pid starting at byte pos.
type hit struct {
	pos int32
	pid int32
}

// newMatcher builds the automaton; patterns must be non-empty, lowercase
// ASCII.
func newMatcher(patterns []string) *matcher {
	m := &matcher{patLens: make([]int32, len(patterns))}
	for _, p := range patterns {
		for i := 0; i < len(p); i++ {
			b := p[i]
			if m.class[b] == 0 {
				m.nclass++
				m.class[b] = uint8(m.nclass)
			}
		}
	}
	for b := 'A'; b <= 'Z'; b++ {
		m.class[b] = m.class[b+'a'-'A']
	}
	m.nclass++
	nc := m.nclass

	// Trie.
	type node struct {
		next map[uint8]int32
		out  []int32
	}
	nodes := []node{{next: map[uint8]int32{}}}
	for pid, p := range patterns {
		m.patLens[pid] = int32(len(p))
		st := int32(0)
		for i := 0; i < len(p); i++ {
			c := m.class[p[i]]
			nx, ok := nodes[st].next[c]
			if !ok {
				nx = int32(len(nodes))
				nodes = append(nodes, node{next: map[uint8]int32{}})
				nodes[st].next[c] = nx
			}
			st = nx
		}
		nodes[st].out = append(nodes[st].out, int32(pid))
	}

	// Breadth-first: failure links folded into a complete transition table.
	m.delta = make([]int32, len(nodes)*nc)
	m.outs = make([][]int32, len(nodes))
	m.hasOut = make([]bool, len(nodes))
	fail := make([]int32, len(nodes))
	queue := []int32{}
	for c := 0; c < nc; c++ {
		if nx, ok := nodes[0].next[uint8(c)]; ok && c != 0 {
			m.delta[c] = nx
			fail[nx] = 0
			queue = append(queue, nx)
		}
	}
	m.outs[0] = nodes[0].out
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		m.outs[st] = append(append([]int32{}, nodes[st].out...), m.outs[fail[st]]...)
		m.hasOut[st] = len(m.outs[st]) > 0
		for c := 0; c < nc; c++ {
			if nx, ok := nodes[st].next[uint8(c)]; ok && c != 0 {
				m.delta[int(st)*nc+c] = nx
				fail[nx] = m.delta[int(fail[st])*nc+c]
				queue = append(queue, nx)
			} else {
				m.delta[int(st)*nc+c] = m.delta[int(fail[st])*nc+c]
			}
		}
	}
	return m
}

// scan appends every pattern occurrence in s to hits, ordered by end.
func (m *matcher) scan(s string, hits []hit) []hit {
	nc := m.nclass
	delta, class, hasOut := m.delta, &m.class, m.hasOut
	st := int32(0)
	for i := 0; i < len(s); i++ {
		st = delta[int(st)*nc+int(class[s[i]])]
		if hasOut[st] {
			for _, pid := range m.outs[st] {
				hits = append(hits, hit{pos: int32(i+1) - m.patLens[pid], pid: pid})
			}
		}
	}
	return hits
}
