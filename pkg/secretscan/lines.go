package secretscan

import "strings"

// RedactLines redacts secrets that span lines (a private key's BEGIN…END
// block) in a window of consecutive lines, such as a file excerpt. Tools
// return such windows one line per string, and a per-string scan never
// sees the whole block; this scans the joined window and replaces the part
// of every line a multi-line secret covers. Single-line secrets are left to
// the per-string pass. It returns the lines (a copy when changed) and the
// number of secrets found by rule id.
func (r *Redactor) RedactLines(lines []string) ([]string, map[string]int) {
	if r == nil || r.rs == nil || len(lines) < 2 {
		return lines, nil
	}
	joined := strings.Join(lines, "\n")
	if !strings.Contains(joined, "-----") { // every multi-line rule (PEM blocks) needs it
		return lines, nil
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	spans, ok := r.findSafe(joined, sc)
	if !ok {
		out := make([]string, len(lines))
		for i := range out {
			out[i] = "[REDACTED:" + Unavailable + "]"
		}
		return out, map[string]int{Unavailable: 1}
	}
	var out []string
	var counts map[string]int
	// starts[i] is the offset of line i in joined.
	starts := make([]int, len(lines))
	for i, off := 1, len(lines[0])+1; i < len(lines); i++ {
		starts[i] = off
		off += len(lines[i]) + 1
	}
	// Overlapping matches of one secret (several rules or variants) are one.
	var merged []span
	for _, sp := range spans {
		if n := len(merged); n > 0 && sp.start < merged[n-1].end {
			last := &merged[n-1]
			last.end = max(last.end, sp.end)
			if r.rs.rules[sp.rule].label > r.rs.rules[last.rule].label {
				last.rule = sp.rule
			}
			continue
		}
		merged = append(merged, sp)
	}
	for _, sp := range merged {
		if !strings.Contains(joined[sp.start:sp.end], "\n") {
			continue
		}
		if out == nil {
			out = append([]string(nil), lines...)
			counts = map[string]int{}
		}
		id := r.rs.rules[sp.rule].id
		counts[id]++
		for i := range lines {
			ls, le := starts[i], starts[i]+len(lines[i])
			a, b := max(ls, sp.start), min(le, sp.end)
			if a >= b {
				continue
			}
			out[i] = lines[i][:a-ls] + "[REDACTED:" + id + "]" + lines[i][b-ls:]
		}
	}
	if out == nil {
		return lines, nil
	}
	return out, counts
}
