package secretscan

import (
	"strings"
	"testing"
)

func TestKnownSecretsAreRedactedAnywhere(t *testing.T) {
	r := New()
	const pw = "wR62KUyUeZjRbz1QtCoM"
	found := r.Find(`db_password = "` + pw + `"`)
	if len(found) != 1 || found[0].Length != len(pw) {
		t.Fatalf("Find = %+v, want one fingerprint of the password", found)
	}
	for _, f := range found {
		if strings.Contains(string(f.Fingerprint[:]), pw) {
			t.Fatal("a fingerprint contains the secret")
		}
	}
	k := NewKnown(found)
	for _, in := range []string{
		"leak/" + pw + "/config.txt",
		"Remove " + pw + " and rotate it.",
		"password=" + pw + "&user=x",
		`{"p":"` + pw + `"}`,
		pw,
		"a.b." + pw + ".c",
		"(" + pw + ")",
	} {
		out, counts := Chain{r, k}.Redact(in)
		if strings.Contains(out, pw) {
			t.Errorf("%q: secret survived as %q", in, out)
		}
		if counts[found[0].RuleID] == 0 {
			t.Errorf("%q: no redaction counted: %v", in, counts)
		}
	}
	// A different value of the same length is left alone, and so is text
	// that merely contains the value glued to other characters of its class.
	if out, _ := k.Redact("xR62KUyUeZjRbz1QtCoM"); out != "xR62KUyUeZjRbz1QtCoM" {
		t.Errorf("an unknown value was redacted: %q", out)
	}
	var nilKnown *Known
	if out, c := nilKnown.Redact(pw); out != pw || c != nil {
		t.Error("a nil set changed the text")
	}
	if NewKnown(nil) != nil {
		t.Error("an empty set is not nil")
	}
	// Short values are never remembered (they would redact words).
	if got := r.Find("password = \"abc\""); len(got) != 0 {
		t.Errorf("short secret remembered: %+v", got)
	}
}
