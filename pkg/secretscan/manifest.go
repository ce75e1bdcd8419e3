package secretscan

import (
	"regexp"
	"strings"
)

// learnGeneratedOnly is the tag of policies/gitleaks.toml for rules whose
// values are learned only when they look generated (rule.valuesOnly).
const learnGeneratedOnly = "learn-generated-only"

// base64UserInfo is the tag of policies/gitleaks.toml for rules whose secret
// is HTTP Basic credentials: reported only if it decodes to user:password
// (documentation that writes the scheme before a literal username:password
// or a function call does not).
const base64UserInfo = "base64-userinfo"

// manifestRule is gitleaks' rule for Kubernetes Secret manifests, under
// which secretManifestSpans reports every data value.
const manifestRule = "kubernetes-secret-yaml"

// secretManifestSpans appends to out a span for every value of a Kubernetes
// Secret's data and stringData: in each YAML document of s (between "---"
// lines) that declares kind: Secret at its top level, block style (one
// key: value a line, block scalars, continuation lines) and flow style
// (data: {a: b}); and in JSON (kubectl get secret -o json) wherever s
// declares "kind": "Secret". Every value there is a secret by definition,
// and gitleaks' rule reports one key per "kind: Secret" within its reach,
// so the later keys of a long manifest were kept. Values that are already
// placeholders, and templates ({{ … }}), are skipped, so that redacting
// again finds nothing new.
func secretManifestSpans(s string, rule int32, out []span) []span {
	// Every answer string passes here (the output layer's redaction), and
	// code says "Secret" and "data" often: parse only a text that declares
	// a Secret.
	if !strings.Contains(s, "Secret") {
		return out
	}
	if hasYAMLSecretKind(s) {
		out = yamlSecretSpans(s, rule, out)
	}
	if strings.Contains(s, `"kind"`) && jsonSecretKind.MatchString(s) {
		out = jsonSecretSpans(s, rule, out)
	}
	return out
}

// yamlLine is one line of a YAML document and where it starts in the text.
type yamlLine struct {
	start int
	text  string
}

func yamlSecretSpans(s string, rule int32, out []span) []span {
	var doc []yamlLine
	flush := func() {
		out = yamlDocSpans(doc, rule, out)
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
			doc = append(doc, yamlLine{start, text})
		}
		start = end + 1
	}
	flush()
	return out
}

// uncomment drops a YAML comment (" #…" or a line that is one) and the
// spaces around what is left.
func uncomment(t string) string {
	if strings.HasPrefix(strings.TrimLeft(t, " \t"), "#") {
		return ""
	}
	if k := strings.Index(t, " #"); k >= 0 {
		t = t[:k]
	}
	if k := strings.Index(t, "\t#"); k >= 0 {
		t = t[:k]
	}
	return strings.TrimRight(t, " \t\r")
}

// blockIndicator matches a block scalar's header: | or > with chomping and
// indentation indicators.
var blockIndicator = regexp.MustCompile(`^[|>][-+0-9]*$`)

func yamlDocSpans(doc []yamlLine, rule int32, out []span) []span {
	secret := false
	for _, l := range doc {
		if v, ok := strings.CutPrefix(uncomment(l.text), "kind:"); ok && strings.Trim(strings.TrimSpace(v), `"'`) == "Secret" {
			secret = true
		}
	}
	if !secret {
		return out
	}
	section := false
	entry := -1 // indentation of the current entry's key; -1 outside one
	for _, l := range doc {
		t := uncomment(l.text)
		body := strings.TrimLeft(t, " \t")
		indent := len(t) - len(body)
		if body == "" {
			continue
		}
		if indent == 0 {
			key, rest, _ := strings.Cut(body, ":")
			key = strings.Trim(key, `"'`)
			section = key == "data" || key == "stringData"
			entry = -1
			if section {
				// Flow style: data: {a: b, c: d}.
				out = flowSpans(l.start+len(t)-len(strings.TrimLeft(rest, " \t")), strings.TrimLeft(rest, " \t"), rule, out)
			}
			continue
		}
		if !section {
			continue
		}
		if entry >= 0 && indent > entry {
			// A block scalar's line, or a plain value continued: the
			// whole line as written (a # inside a secret is no comment).
			raw := strings.TrimRight(l.text[indent:], " \t\r")
			out = appendValue(out, l.start+indent, raw, rule)
			continue
		}
		k := strings.Index(body, ":")
		if k < 0 {
			continue
		}
		entry = indent
		v := strings.TrimLeft(body[k+1:], " \t")
		if blockIndicator.MatchString(v) {
			continue
		}
		// The value as written: a quoted one to its closing quote (a " #"
		// inside it is part of the secret), a plain one to a comment.
		at := l.start + len(t) - len(v)
		raw := l.text[at-l.start:]
		if raw == "" {
			continue // "password:" with no value on its line
		}
		if q := raw[0]; q == '"' || q == '\'' {
			if end := strings.IndexByte(raw[1:], q); end >= 0 {
				raw = raw[:end+2]
			}
		} else {
			raw = uncomment(raw)
		}
		out = appendValue(out, at, raw, rule)
	}
	return out
}

// flowSpans reports the values of a flow mapping "{a: b, c: "d"}" that
// starts at offset at (nothing for anything else).
func flowSpans(at int, v string, rule int32, out []span) []span {
	if !strings.HasPrefix(v, "{") {
		return out
	}
	end := strings.IndexByte(v, '}')
	if end < 0 {
		end = len(v)
	}
	for i := 1; i < end; {
		j := strings.IndexByte(v[i:end], ',')
		if j < 0 {
			j = end
		} else {
			j += i
		}
		pair := v[i:j]
		if k := strings.Index(pair, ":"); k >= 0 {
			val := strings.TrimLeft(pair[k+1:], " \t")
			val = strings.TrimRight(val, " \t")
			out = appendValue(out, at+i+len(pair[:k+1])+len(pair[k+1:])-len(strings.TrimLeft(pair[k+1:], " \t")), val, rule)
		}
		i = j + 1
	}
	return out
}

// yamlSecretKind is a top-level kind: Secret line (yamlDocSpans decides
// per document).
var yamlSecretKind = regexp.MustCompile(`^kind:[ \t]*["']?Secret["']?[ \t]*(?:#.*)?\r?$`)

// hasYAMLSecretKind reports whether a line of s is yamlSecretKind. It looks
// only at lines starting with "kind:": a multi-line regexp over a whole
// 32 KiB answer cost a quarter of its redaction.
func hasYAMLSecretKind(s string) bool {
	for at := 0; ; {
		k := strings.Index(s[at:], "kind:")
		if k < 0 {
			return false
		}
		i := at + k
		at = i + len("kind:")
		if i > 0 && s[i-1] != '\n' {
			continue
		}
		end := strings.IndexByte(s[i:], '\n')
		if end < 0 {
			end = len(s) - i
		}
		if yamlSecretKind.MatchString(s[i : i+end]) {
			return true
		}
	}
}

// jsonSecretKind finds a JSON Secret; jsonDataObject the start of its data
// or stringData object; jsonPair one "key": "value" member in it.
var (
	jsonSecretKind = regexp.MustCompile(`"kind"\s*:\s*"Secret"`)
	jsonDataObject = regexp.MustCompile(`"(?:data|stringData)"\s*:\s*\{`)
	jsonPair       = regexp.MustCompile(`"(?:[^"\\]|\\.)*"\s*:\s*"((?:[^"\\]|\\.)*)"`)
)

func jsonSecretSpans(s string, rule int32, out []span) []span {
	for _, loc := range jsonDataObject.FindAllStringIndex(s, -1) {
		end := strings.IndexByte(s[loc[1]:], '}')
		if end < 0 {
			end = len(s)
		} else {
			end += loc[1]
		}
		obj := s[loc[1]:end]
		for _, m := range jsonPair.FindAllStringSubmatchIndex(obj, -1) {
			out = appendValue(out, loc[1]+m[2], obj[m[2]:m[3]], rule)
		}
	}
	return out
}

// appendValue appends the span of value v, which starts at offset at of the
// text, without its quotes; a placeholder, a template or an empty value is
// no secret.
func appendValue(out []span, at int, v string, rule int32) []span {
	v = strings.TrimRight(v, " \t\r")
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		at, v = at+1, v[1:len(v)-1]
	}
	if v == "" || v == "{}" || v == "|" || v == ">" || strings.HasPrefix(v, "[REDACTED:") || strings.Contains(v, "{{") {
		return out
	}
	return append(out, span{start: at, end: at + len(v), rule: rule})
}
