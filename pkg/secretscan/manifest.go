package secretscan

import "strings"

// manifestRule is gitleaks' rule for Kubernetes Secret manifests, under
// which secretManifestSpans reports every data value.
const manifestRule = "kubernetes-secret-yaml"

// secretManifestSpans appends to out a span for the value of every entry
// under data: or stringData: in each YAML document of s (between "---"
// lines) that declares kind: Secret at its top level, and for every line
// of a block scalar value (key: |). Every value there is a secret by
// definition, and gitleaks' rule reports one key per "kind: Secret" within
// its reach, so the later keys of a long manifest were kept. Values that
// are already placeholders are skipped, so that redacting again finds
// nothing new.
func secretManifestSpans(s string, rule int32, out []span) []span {
	if !strings.Contains(s, "Secret") || !strings.Contains(s, "ata:") {
		return out
	}
	type line struct {
		start int
		text  string
	}
	var doc []line
	flush := func() {
		secret := false
		for _, l := range doc {
			if v, ok := strings.CutPrefix(l.text, "kind:"); ok && strings.Trim(strings.TrimSpace(v), `"'`) == "Secret" {
				secret = true
			}
		}
		if !secret {
			doc = doc[:0]
			return
		}
		section := false
		block := -1 // indentation of a block scalar's key, -1 for none
		for _, l := range doc {
			t := strings.TrimRight(l.text, " \t\r")
			body := strings.TrimLeft(t, " \t")
			indent := len(t) - len(body)
			if body == "" || strings.HasPrefix(body, "#") {
				continue
			}
			if indent == 0 {
				section = body == "data:" || body == "stringData:"
				block = -1
				continue
			}
			if !section {
				continue
			}
			if block >= 0 && indent > block {
				out = appendValue(out, l.start+indent, body, rule)
				continue
			}
			block = -1
			k := strings.Index(body, ":")
			if k < 0 {
				continue
			}
			v := strings.TrimLeft(body[k+1:], " \t")
			if v == "|" || v == ">" || strings.HasPrefix(v, "|-") || strings.HasPrefix(v, ">-") || v == "|+" || v == ">+" {
				block = indent
				continue
			}
			out = appendValue(out, l.start+len(t)-len(v), v, rule)
		}
		doc = doc[:0]
	}
	for start := 0; start < len(s); {
		end := strings.IndexByte(s[start:], '\n')
		if end < 0 {
			end = len(s)
		} else {
			end += start
		}
		text := s[start:end]
		if strings.HasPrefix(text, "---") {
			flush()
		} else {
			doc = append(doc, line{start, text})
		}
		start = end + 1
	}
	flush()
	return out
}

// appendValue appends the span of value v, which starts at offset at of the
// text, without its quotes and trailing comment; a placeholder or an empty
// value is no secret.
func appendValue(out []span, at int, v string, rule int32) []span {
	if k := strings.Index(v, " #"); k >= 0 {
		v = v[:k]
	}
	v = strings.TrimRight(v, " \t\r")
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		at, v = at+1, v[1:len(v)-1]
	}
	if v == "" || strings.HasPrefix(v, "[REDACTED:") || v == "{}" {
		return out
	}
	return append(out, span{start: at, end: at + len(v), rule: rule})
}
