package secretscan

import (
	"slices"
	"strings"
)

// RedactDocument redacts a whole document (a file, a finding body, a rule's
// instructions) with full multi-line context, for storage: rules that need
// the surrounding lines (a private key's BEGIN…END block, a Kubernetes
// Secret manifest, keyword assignments) see them, because the document is
// scanned as one string. A secret that spans lines becomes one placeholder
// per line it covers, and every newline is kept, so the redacted document
// has exactly as many lines as the original and line numbers stay true.
// It returns s and nil when there is nothing to replace.
func (r *Redactor) RedactDocument(s string) (string, map[string]int) {
	out, counts, _ := r.redactDocument(s, false)
	return out, counts
}

// RedactAndFind is RedactDocument that also returns the fingerprints of the
// secrets it replaced (as Find), from one scan: ingestion learns them and
// stores the redacted text.
func (r *Redactor) RedactAndFind(s string) (string, []Found) {
	out, _, found := r.redactDocument(s, true)
	return out, found
}

func (r *Redactor) redactDocument(s string, find bool) (string, map[string]int, []Found) {
	if s == "" {
		return s, nil, nil
	}
	if r == nil || r.rs == nil {
		return failClosedDocument(s)
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	var counts map[string]int
	var found []Found
	for pass := 0; pass < maxPasses; pass++ {
		all, ok := r.findSafe(s, sc)
		if !ok {
			return failClosedDocument(s)
		}
		spans := fresh(s, all, pass)
		if len(spans) == 0 {
			break
		}
		if find {
			found = appendFound(found, r.found(s, spans))
		}
		var c map[string]int
		s, c = r.replace(s, spans, writeLinePlaceholders)
		counts = addCounts(counts, c)
	}
	return s, counts, found
}

// failClosedDocument hides every line of s, keeping the line structure.
func failClosedDocument(s string) (string, map[string]int, []Found) {
	n := strings.Count(s, "\n")
	return strings.Repeat("[REDACTED:"+Unavailable+"]\n", n) + "[REDACTED:" + Unavailable + "]", map[string]int{Unavailable: 1}, nil
}

// maxPasses bounds the passes of a redaction. Redacting repeats until a
// pass finds nothing, because a rule may match only one secret of a block
// per match: kubernetes-secret-yaml reports one data key for each
// "kind: Secret" within its reach, so once that key is a placeholder the
// next key matches. Stored text must be a fixed point of redaction: text
// redacted once but not twice kept Secret values that the answers (which
// redact again) hid and search matched, an oracle for them.
const maxPasses = 16

// fresh drops, after the first pass, the spans that are a placeholder of an
// earlier pass: a rule whose secret may be any text (a URL's password) finds
// the placeholder itself, and redacting it again would change nothing but
// the counts.
func fresh(s string, spans []span, pass int) []span {
	if pass == 0 {
		return spans
	}
	out := spans[:0]
	for _, sp := range spans {
		if t := s[sp.start:sp.end]; !(strings.HasPrefix(t, "[REDACTED:") && strings.HasSuffix(t, "]")) {
			out = append(out, sp)
		}
	}
	return out
}

// appendFound adds the fingerprints of more that are not in found yet.
func appendFound(found, more []Found) []Found {
	for _, m := range more {
		if !slices.ContainsFunc(found, func(f Found) bool { return f.Fingerprint == m.Fingerprint }) {
			found = append(found, m)
		}
	}
	return found
}

// addCounts adds the replacements per rule of c to counts.
func addCounts(counts, c map[string]int) map[string]int {
	if len(c) == 0 {
		return counts
	}
	if counts == nil {
		counts = map[string]int{}
	}
	for id, n := range c {
		counts[id] += n
	}
	return counts
}

// writeLinePlaceholders writes one placeholder for every line of secret
// that holds anything but a line terminator, and keeps every "\n" (and the
// "\r" before it), so that the line count does not change.
func writeLinePlaceholders(b *strings.Builder, secret, placeholder string) {
	for {
		k := strings.IndexByte(secret, '\n')
		part := secret
		if k >= 0 {
			part = secret[:k]
		}
		cr := strings.HasSuffix(part, "\r")
		part = strings.TrimSuffix(part, "\r")
		if part != "" {
			b.WriteString(placeholder)
		}
		if cr {
			b.WriteByte('\r')
		}
		if k < 0 {
			return
		}
		b.WriteByte('\n')
		secret = secret[k+1:]
	}
}
