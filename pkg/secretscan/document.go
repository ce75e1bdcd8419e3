package secretscan

import "strings"

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
		// Fail closed, keeping the line structure.
		n := strings.Count(s, "\n")
		return strings.Repeat("[REDACTED:"+Unavailable+"]\n", n) + "[REDACTED:" + Unavailable + "]", map[string]int{Unavailable: 1}, nil
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	spans := r.rs.find(s, sc)
	if len(spans) == 0 {
		return s, nil, nil
	}
	var found []Found
	if find {
		found = r.found(s, spans)
	}
	out, counts := r.replace(s, spans, writeLinePlaceholders)
	return out, counts, found
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
