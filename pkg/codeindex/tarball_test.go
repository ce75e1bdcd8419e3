package codeindex

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

const tarCommit = "0123456789abcdef0123456789abcdef01234567"

// entry is one tar entry of a test archive.
type entry struct {
	name     string
	typeflag byte
	content  string
	link     string
}

func file(name, content string) entry {
	return entry{name: name, typeflag: tar.TypeReg, content: content}
}
func dir(name string) entry { return entry{name: name, typeflag: tar.TypeDir} }

// rawTar writes the entries as GitHub does: a pax global header with the
// commit id first (when comment is not empty), then the entries in order.
func rawTar(t *testing.T, comment string, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	mtime := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	if comment != "" {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": comment}, Format: tar.FormatPAX}); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typeflag, Mode: 0o644, ModTime: mtime, Linkname: e.link}
		switch e.typeflag {
		case tar.TypeReg:
			h.Size = int64(len(e.content))
		case tar.TypeDir:
			h.Mode = 0o755
		case tar.TypeSymlink:
			h.Mode = 0o777
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.content)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gz(t *testing.T, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func tarball(t *testing.T, comment string, entries ...entry) []byte {
	t.Helper()
	return gz(t, rawTar(t, comment, entries...))
}

// blobSHA is git's object id for a blob, computed independently of the
// code under test.
func blobSHA(content string) string {
	sum := sha1.Sum([]byte("blob " + strconv.Itoa(len(content)) + "\x00" + content))
	return hex.EncodeToString(sum[:])
}

func TestReadTarball(t *testing.T) {
	t.Parallel()
	const top = "acme-api-0123456/"
	big := strings.Repeat("y", MaxFileBytes+1)
	archive := tarball(t, tarCommit,
		dir(top),
		file(top+"a.go", "package a\r\n\r\nfunc A() {}\r\n"),
		dir(top+"sub/"),
		dir(top+"sub/deeper/"),
		file(top+"sub/deeper/c.rs", "fn main() {}\n"),
		file(top+"sub/b.py", "print('b')"),
		file(top+"bin.dat", "GIF89a\x00\x01\x02"),
		file(top+"big.txt", big),
		file(top+"latin1.txt", "caf\xe9\n"),
		file(top+"empty.txt", ""),
		file(top+"name with sp.c", "int x;\n"),
		entry{name: top + "link.go", typeflag: tar.TypeSymlink, link: "a.go"},
		entry{name: top + "hard.go", typeflag: tar.TypeLink, link: top + "a.go"},
		entry{name: top + "fifo", typeflag: tar.TypeFifo},
	)
	snap, err := ReadTarball(bytes.NewReader(archive), tarCommit)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Commit != tarCommit {
		t.Errorf("Commit = %q", snap.Commit)
	}
	var paths []string
	byPath := map[string]File{}
	for _, f := range snap.Files {
		paths = append(paths, f.Path)
		byPath[f.Path] = f
	}
	// Sorted, relative to the top directory, regular files only.
	want := []string{"a.go", "big.txt", "bin.dat", "empty.txt", "latin1.txt", "name with sp.c", "sub/b.py", "sub/deeper/c.rs"}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths = %q, want %q", paths, want)
	}
	if f := byPath["a.go"]; !slices.Equal(f.Lines, []string{"package a", "", "func A() {}"}) || f.Language != "go" || f.SkipReason != "" || f.Size != 26 {
		t.Errorf("a.go = %+v", f)
	}
	if f := byPath["sub/deeper/c.rs"]; !slices.Equal(f.Lines, []string{"fn main() {}"}) || f.Language != "rust" {
		t.Errorf("sub/deeper/c.rs = %+v", f)
	}
	if f := byPath["sub/b.py"]; !slices.Equal(f.Lines, []string{"print('b')"}) || f.Language != "python" {
		t.Errorf("sub/b.py = %+v", f)
	}
	if f := byPath["bin.dat"]; f.SkipReason != "binary" || f.Lines != nil || f.Size != 9 {
		t.Errorf("bin.dat = %+v", f)
	}
	if f := byPath["big.txt"]; f.SkipReason != "too large" || f.Lines != nil || f.Size != MaxFileBytes+1 {
		t.Errorf("big.txt: SkipReason %q, %d lines, size %d", f.SkipReason, len(f.Lines), f.Size)
	}
	if f := byPath["latin1.txt"]; !slices.Equal(f.Lines, []string{"caf\ufffd"}) || f.Size != 5 {
		t.Errorf("latin1.txt = %q (size %d), want invalid UTF-8 replaced", f.Lines, f.Size)
	}
	if f := byPath["empty.txt"]; f.SkipReason != "" || len(f.Lines) != 0 || f.Size != 0 {
		t.Errorf("empty.txt = %+v", f)
	}
	if f := byPath["name with sp.c"]; !slices.Equal(f.Lines, []string{"int x;"}) || f.Language != "c" {
		t.Errorf("name with sp.c = %+v", f)
	}

	// BlobSHA is git's blob id of the raw bytes, for indexed and skipped
	// files alike (the invalid UTF-8 is hashed as it is, not as fixed).
	contents := map[string]string{
		"a.go": "package a\r\n\r\nfunc A() {}\r\n", "big.txt": big, "bin.dat": "GIF89a\x00\x01\x02",
		"empty.txt": "", "latin1.txt": "caf\xe9\n", "sub/b.py": "print('b')",
	}
	for p, c := range contents {
		if got := byPath[p].BlobSHA; got != blobSHA(c) {
			t.Errorf("%s: BlobSHA %s, want %s", p, got, blobSHA(c))
		}
	}
	// Well-known ids pin the format itself.
	if got := byPath["empty.txt"].BlobSHA; got != "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391" {
		t.Errorf("empty blob = %s", got)
	}
	if _, err := exec.LookPath("git"); err == nil {
		for p, c := range contents {
			cmd := exec.Command("git", "hash-object", "--stdin")
			cmd.Stdin = strings.NewReader(c)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("git hash-object: %v", err)
			}
			if got, want := byPath[p].BlobSHA, strings.TrimSpace(string(out)); got != want {
				t.Errorf("%s: BlobSHA %s, git hash-object %s", p, got, want)
			}
		}
	}
}

// TestReadTarballMatchesReadGit reads a real `git archive` of a real
// repository and compares it with ReadGit's view of the same commit.
func TestReadTarballMatchesReadGit(t *testing.T) {
	t.Parallel()
	dir := gitRepo(t, map[string]string{
		"a.go":       "package a\n",
		"sub/b.py":   "print('b')\n",
		"bin.dat":    "GIF89a\x00\x01\x02",
		"latin1.txt": "caf\xe9\n",
	})
	fromGit, err := ReadGit(t.Context(), dir, "")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "-C", dir, "archive", "--format=tar.gz", "--prefix=acme-api-"+fromGit.Commit[:7]+"/", fromGit.Commit)
	archive, err := cmd.Output()
	if err != nil {
		t.Fatalf("git archive: %v", err)
	}
	fromTar, err := ReadTarball(bytes.NewReader(archive), "")
	if err != nil {
		t.Fatal(err)
	}
	if fromTar.Commit != fromGit.Commit {
		t.Errorf("commit from the archive header = %q, want %q", fromTar.Commit, fromGit.Commit)
	}
	if len(fromTar.Files) != len(fromGit.Files) {
		t.Fatalf("%d files from the archive, %d from git", len(fromTar.Files), len(fromGit.Files))
	}
	for i, g := range fromGit.Files {
		f := fromTar.Files[i]
		if f.Path != g.Path || f.BlobSHA != g.BlobSHA || f.Size != g.Size || f.SkipReason != g.SkipReason || f.Language != g.Language || !slices.Equal(f.Lines, g.Lines) {
			t.Errorf("file %d: archive %+v, git %+v", i, f, g)
		}
	}
}

func TestReadTarballCommit(t *testing.T) {
	t.Parallel()
	archive := tarball(t, tarCommit, dir("o-r-0123456/"), file("o-r-0123456/a.txt", "a\n"))
	snap, err := ReadTarball(bytes.NewReader(archive), "")
	if err != nil || snap.Commit != tarCommit {
		t.Errorf("no commit given: %q, %v; want the header's", snap.Commit, err)
	}
	if snap, err := ReadTarball(bytes.NewReader(archive), strings.ToUpper(tarCommit)); err != nil || snap.Commit != strings.ToUpper(tarCommit) {
		t.Errorf("same commit in capitals: %q, %v", snap.Commit, err)
	}
	other := strings.Repeat("f", 40)
	if _, err := ReadTarball(bytes.NewReader(archive), other); err == nil || codelotse.ErrorCode(err) != codelotse.Invalid || !strings.Contains(err.Error(), other) {
		t.Errorf("another commit: err %v, want invalid naming both", err)
	}
	// A label that is not a full id is the caller's business.
	if snap, err := ReadTarball(bytes.NewReader(archive), "main"); err != nil || snap.Commit != "main" {
		t.Errorf("label: %q, %v", snap.Commit, err)
	}
	// An archive without a global header (not from git archive) works too.
	plain := tarball(t, "", file("o-r-0123456/a.txt", "a\n"))
	if snap, err := ReadTarball(bytes.NewReader(plain), tarCommit); err != nil || snap.Commit != tarCommit || len(snap.Files) != 1 {
		t.Errorf("no header: %+v, %v", snap, err)
	}
	// A top directory written without its slash, and an empty archive.
	bare := tarball(t, tarCommit, entry{name: "o-r-0123456", typeflag: tar.TypeDir}, file("o-r-0123456/a.txt", "a\n"))
	if snap, err := ReadTarball(bytes.NewReader(bare), ""); err != nil || len(snap.Files) != 1 || snap.Files[0].Path != "a.txt" {
		t.Errorf("bare top directory: %+v, %v", snap, err)
	}
	if snap, err := ReadTarball(bytes.NewReader(tarball(t, tarCommit)), ""); err != nil || len(snap.Files) != 0 || snap.Commit != tarCommit {
		t.Errorf("empty archive: %+v, %v", snap, err)
	}
}

func TestReadTarballDuplicateReplaces(t *testing.T) {
	t.Parallel()
	archive := tarball(t, tarCommit, file("o-r-1/a.txt", "old\n"), file("o-r-1/a.txt", "new\n"))
	snap, err := ReadTarball(bytes.NewReader(archive), "")
	if err != nil || len(snap.Files) != 1 || !slices.Equal(snap.Files[0].Lines, []string{"new"}) || snap.Files[0].BlobSHA != blobSHA("new\n") {
		t.Errorf("duplicate: %+v, %v", snap.Files, err)
	}
}

func TestReadTarballRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		archive []byte
		want    string
	}{
		{"not gzip", []byte("PK\x03\x04 a zip file"), "not a gzip"},
		{"gzip but not tar", gz(t, []byte(strings.Repeat("not a tar header ", 64))), "damaged"},
		{"dot-dot", tarball(t, tarCommit, file("o-r-1/../../etc/passwd", "x")), `".."`},
		{"dot-dot directory", tarball(t, tarCommit, dir("o-r-1/a/../../")), `".."`},
		{"dot-dot at the top", tarball(t, tarCommit, file("../x", "x")), `".."`},
		{"absolute", tarball(t, tarCommit, file("/etc/passwd", "x")), "absolute"},
		{"unclean", tarball(t, tarCommit, file("o-r-1//a", "x")), "unclean"},
		{"two top directories", tarball(t, tarCommit, file("o-r-1/a", "x"), file("o-r-2/b", "y")), "more than one top directory"},
		{"file at the top", tarball(t, tarCommit, file("README", "x")), "outside its top directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadTarball(bytes.NewReader(tt.archive), tarCommit)
			if err == nil || codelotse.ErrorCode(err) != codelotse.Invalid || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want invalid containing %q", err, tt.want)
			}
		})
	}

	t.Run("truncated", func(t *testing.T) {
		archive := tarball(t, tarCommit, file("o-r-1/a.txt", strings.Repeat("abcdefgh", 10000)))
		_, err := ReadTarball(bytes.NewReader(archive[:len(archive)/2]), tarCommit)
		if err == nil || codelotse.ErrorCode(err) != codelotse.Invalid {
			t.Errorf("err = %v, want invalid", err)
		}
	})
}

func TestReadTarballBounds(t *testing.T) {
	t.Parallel()
	raw := rawTar(t, tarCommit, dir("o-r-1/"), file("o-r-1/a.txt", strings.Repeat("a", 5000)), file("o-r-1/b.txt", "b\n"), file("o-r-1/c.txt", "c\n"))
	archive := gz(t, raw)

	// The uncompressed bound counts every byte of the tar stream: exactly
	// at the bound is fine, one byte less is refused with a clear error.
	if snap, err := readTarball(bytes.NewReader(archive), "", int64(len(raw)), 10); err != nil || len(snap.Files) != 3 {
		t.Errorf("at the byte bound: %d files, %v", len(snap.Files), err)
	}
	_, err := readTarball(bytes.NewReader(archive), "", int64(len(raw))-1, 10)
	if err == nil || codelotse.ErrorCode(err) != codelotse.Invalid || !strings.Contains(err.Error(), "too large to index") || !strings.Contains(err.Error(), "uncompressed") {
		t.Errorf("over the byte bound: err = %v", err)
	}
	// A gzip bomb: little compressed, much uncompressed.
	bomb := tarball(t, tarCommit, file("o-r-1/zeros.txt", strings.Repeat("\x00", 4<<20)))
	if len(bomb) > 64<<10 {
		t.Fatalf("bomb is %d bytes compressed", len(bomb))
	}
	if _, err := readTarball(bytes.NewReader(bomb), "", 1<<20, 10); err == nil || !strings.Contains(err.Error(), "1 MiB uncompressed") {
		t.Errorf("gzip bomb: err = %v", err)
	}

	// The file bound counts regular files only.
	if snap, err := readTarball(bytes.NewReader(archive), "", MaxTarballBytes, 3); err != nil || len(snap.Files) != 3 {
		t.Errorf("at the file bound: %d files, %v", len(snap.Files), err)
	}
	_, err = readTarball(bytes.NewReader(archive), "", MaxTarballBytes, 2)
	if err == nil || codelotse.ErrorCode(err) != codelotse.Invalid || !strings.Contains(err.Error(), "more than 2 files") {
		t.Errorf("over the file bound: err = %v", err)
	}
}
