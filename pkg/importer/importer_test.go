package importer

import (
	"testing"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

func TestLineCol(t *testing.T) {
	data := []byte("ab\ncdé\n\nxyz")
	tests := []struct {
		off  int64
		want string
	}{
		{-1, "1:1"},
		{0, "1:1"},
		{1, "1:2"},
		{2, "1:3"}, // the newline itself
		{3, "2:1"},
		{5, "2:3"},  // start of é (two bytes)
		{7, "2:4"},  // the newline after é: one character further
		{8, "3:1"},  // empty line
		{9, "4:1"},  // x
		{12, "4:4"}, // end of data
		{99, "4:4"}, // clamped
	}
	for _, tc := range tests {
		if got := lineCol(data, tc.off); got != tc.want {
			t.Errorf("lineCol(%d) = %s, want %s", tc.off, got, tc.want)
		}
	}
}

func TestCleanPath(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{in: "", want: ""},
		{in: "pkg/importer/review.go", want: "pkg/importer/review.go"},
		{in: "./pkg/importer/review.go", want: "pkg/importer/review.go"},
		{in: "/pkg/importer/review.go", want: "pkg/importer/review.go"},
		{in: "//pkg//importer/./review.go", want: "pkg/importer/review.go"},
		{in: `pkg\importer\review.go`, want: "pkg/importer/review.go"},
		{in: "docs/", want: "docs"},
		{in: ".", want: ""},
		{in: "a..b/c...d", want: "a..b/c...d"},
		{in: "..", bad: true},
		{in: "../x", bad: true},
		{in: "a/../b", bad: true},
		{in: `a\..\b`, bad: true},
	}
	for _, tc := range tests {
		got, err := cleanPath("/p", tc.in)
		switch {
		case tc.bad && err == nil:
			t.Errorf("cleanPath(%q) = %q, want an error", tc.in, got)
		case tc.bad && codelotse.ErrorCode(err) != codelotse.Invalid:
			t.Errorf("cleanPath(%q): error %v is not Invalid", tc.in, err)
		case !tc.bad && (err != nil || got != tc.want):
			t.Errorf("cleanPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// The decoder's checks follow nested types, maps and pointers, and accept
// null anywhere.
func TestDecodeStrictNested(t *testing.T) {
	type inner struct {
		N     int               `json:"n"`
		Tags  map[string]string `json:"tags"`
		Skip  string            `json:"-"`
		Plain string
	}
	type outer struct {
		Items []*inner `json:"items"`
		Any   any      `json:"any"`
	}
	tests := []struct {
		in   string
		want string // "" for success
	}{
		{`{"items":[null,{"n":1,"tags":{"a":"b"},"Plain":"p"}],"any":{"deep":[1,[2,{"x":null}]]}}`, ""},
		{`{"items":[{},{"tags":{"a/b~c":1}}]}`, `line 1:31: /items/1/tags/a~1b~0c: must be a string, not the number 1`},
		{`{"items":[{"Skip":"x"}]}`, `line 1:12: /items/0: unknown field "Skip"`},
		{`{"items":[{"plain":"x"}]}`, `line 1:12: /items/0: unknown field "plain" (field names are case-sensitive: "Plain")`},
		{`{"items":[{"n":-1}],"any":"x","extra":[]}`, `line 1:31: /: unknown field "extra"`},
	}
	for _, tc := range tests {
		var v outer
		err := decodeStrict([]byte(tc.in), &v, true)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.want != "" && codelotse.ErrorMessage(err) != tc.want:
			t.Errorf("%s:\n got: %v\nwant: %s", tc.in, err, tc.want)
		}
	}
	// Not strict: unknown members are skipped whatever their shape, and
	// known ones match in any case, as encoding/json does.
	var v outer
	if err := decodeStrict([]byte(`{"x":{"y":[{"z":1}]},"ITEMS":[{"N":2}]}`), &v, false); err != nil || len(v.Items) != 1 || v.Items[0].N != 2 {
		t.Errorf("lenient decode: %+v, %v", v, err)
	}
}

// Fingerprint is part of the stored data: re-imports match findings by it.
func TestFingerprintPinned(t *testing.T) {
	tests := []struct {
		rule, path string
		start, end *int
		title      string
		want       string
	}{
		{"", "", nil, nil, "", "4cee5cbad9b2ff2e0319fea897cd126e"},
		{"sql/injection", "internal/store/orders.go", intp(55), intp(57), "Query built with fmt.Sprintf", "7bd217108f9ec2993d81dd4b5823c099"},
	}
	for _, tc := range tests {
		if got := Fingerprint(tc.rule, tc.path, tc.start, tc.end, tc.title); got != tc.want {
			t.Errorf("Fingerprint(%q, %q, …, %q) = %s, want %s", tc.rule, tc.path, tc.title, got, tc.want)
		}
	}
	if Fingerprint("r", "a.go", nil, nil, "t") != Fingerprint("r", "a.go", intp(0), intp(0), "t") {
		t.Error("a missing line and line 0 differ")
	}
}
