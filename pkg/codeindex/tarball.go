package codeindex

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// Bounds for ReadTarball. An archive that exceeds one is refused as a whole
// rather than indexed in part: a partial index would silently answer "no
// match" for code that exists.
const (
	// MaxTarballBytes bounds the uncompressed tar stream (headers and the
	// content of every entry, including the files that are only listed).
	// It is what the CPU and, for indexed files, the memory cost is
	// proportional to, and it stops a gzip bomb.
	MaxTarballBytes = 2 << 30
	// MaxTarballFiles bounds the number of regular files, each of which
	// becomes a row in code_files.
	MaxTarballFiles = 200_000
)

// ReadTarball reads a repository archive as GitHub serves it from
// GET /repos/{owner}/{repo}/tarball/{ref}: a gzip-compressed tar with one
// top directory ("owner-repo-shortsha/") holding the tree. It returns the
// same Snapshot ReadGit would for that commit:
//
//   - paths are relative to the top directory and sorted;
//   - only regular files are content: directories, symbolic links, hard
//     links, devices and pax headers are left out;
//   - files over MaxFileBytes are listed with SkipReason "too large" and
//     streamed through the hash without being kept in memory;
//   - files with a NUL byte are listed with SkipReason "binary";
//   - invalid UTF-8 becomes U+FFFD, because PostgreSQL text must be valid;
//   - BlobSHA is git's blob id of the content, sha1("blob <len>\x00" +
//     content), so it equals `git hash-object` and what ReadGit reports.
//
// commit is recorded as the snapshot's commit. GitHub writes the commit id
// into the archive's pax global header (as `git archive` does); when commit
// is empty that id is used, and when both are full ids that differ the
// archive is refused, because indexing it under the wrong commit would show
// one commit's code as another's.
//
// An entry whose path is absolute, contains "..", or lies outside the one
// top directory makes the whole archive invalid: GitHub never produces one,
// so such an archive is not GitHub's. Errors carry codelotse.Invalid.
func ReadTarball(r io.Reader, commit string) (Snapshot, error) {
	return readTarball(r, commit, MaxTarballBytes, MaxTarballFiles)
}

// errTarballTooLarge is returned by the counting reader when the
// uncompressed stream passes its bound.
var errTarballTooLarge = errors.New("uncompressed archive too large")

func readTarball(r io.Reader, commit string, maxBytes int64, maxFiles int) (Snapshot, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return Snapshot{}, codelotse.Wrap(codelotse.Invalid, err, "the repository archive is not a gzip file")
	}
	defer zr.Close()
	counted := &boundedReader{r: zr, left: maxBytes}
	tr := tar.NewReader(counted)

	snap := Snapshot{Commit: commit}
	var top string            // the top directory, with its trailing slash
	index := map[string]int{} // path → position in snap.Files
	var buf bytes.Buffer      // reused for file content
	fail := func(err error) (Snapshot, error) {
		if errors.Is(err, errTarballTooLarge) {
			return Snapshot{}, codelotse.Errorf(codelotse.Invalid,
				"the repository archive is larger than %s uncompressed; it is too large to index", humanBytes(maxBytes))
		}
		return Snapshot{}, codelotse.Wrap(codelotse.Invalid, err, "the repository archive is damaged")
	}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			// git archive records the commit id as the global comment.
			if id := hdr.PAXRecords["comment"]; isFullObjectID(id) {
				switch {
				case snap.Commit == "":
					snap.Commit = id
				case isFullObjectID(snap.Commit) && !strings.EqualFold(snap.Commit, id):
					return Snapshot{}, codelotse.Errorf(codelotse.Invalid,
						"the repository archive is of commit %s, not %s", id, snap.Commit)
				}
			}
			continue
		}
		name := hdr.Name
		if err := checkEntryName(name); err != nil {
			return Snapshot{}, err
		}
		if top == "" {
			first, _, _ := strings.Cut(name, "/")
			top = first + "/"
		}
		rel, ok := strings.CutPrefix(name, top)
		switch {
		case ok:
		case name+"/" == top:
			rel = "" // the top directory itself, written without its slash
		default:
			return Snapshot{}, codelotse.Errorf(codelotse.Invalid,
				"the repository archive has more than one top directory (%q and %q)", strings.TrimSuffix(top, "/"), name)
		}
		rel = strings.TrimSuffix(rel, "/")
		// archive/tar reports the legacy regular-file flag (TypeRegA) as
		// TypeReg, so this is every regular file.
		if hdr.Typeflag != tar.TypeReg {
			continue // directories, links and devices are not content
		}
		if rel == "" {
			return Snapshot{}, codelotse.Errorf(codelotse.Invalid, "the repository archive has a file %q outside its top directory", name)
		}
		if hdr.Size < 0 {
			return Snapshot{}, codelotse.Errorf(codelotse.Invalid, "the repository archive has a file %q with a negative size", rel)
		}

		f := File{Path: rel, Size: hdr.Size, Language: Language(rel)}
		h := sha1.New()
		h.Write([]byte("blob " + strconv.FormatInt(hdr.Size, 10) + "\x00"))
		if hdr.Size > MaxFileBytes {
			// Hash it on the way past without keeping it.
			if _, err := io.Copy(h, tr); err != nil {
				return fail(err)
			}
			f.SkipReason = "too large"
		} else {
			buf.Reset()
			if _, err := io.Copy(&buf, tr); err != nil {
				return fail(err)
			}
			content := buf.Bytes()
			h.Write(content)
			if IsBinary(content) {
				f.SkipReason = "binary"
			} else {
				f.Lines = SplitLines(string(bytes.ToValidUTF8(content, []byte("\uFFFD"))))
			}
		}
		f.BlobSHA = hex.EncodeToString(h.Sum(nil))

		if i, dup := index[rel]; dup {
			// A later entry for the same path replaces the earlier one, as
			// extracting the archive would.
			snap.Files[i] = f
			continue
		}
		if len(snap.Files) >= maxFiles {
			return Snapshot{}, codelotse.Errorf(codelotse.Invalid,
				"the repository archive has more than %d files; it is too large to index", maxFiles)
		}
		index[rel] = len(snap.Files)
		snap.Files = append(snap.Files, f)
	}
	sort.Slice(snap.Files, func(i, j int) bool { return snap.Files[i].Path < snap.Files[j].Path })
	return snap, nil
}

// checkEntryName refuses names that would escape the tree or that GitHub
// never writes. Names are slash-separated whatever the platform.
func checkEntryName(name string) error {
	switch {
	case name == "" || strings.HasPrefix(name, "/"):
		return codelotse.Errorf(codelotse.Invalid, "the repository archive has an entry with an absolute or empty path %q", name)
	case strings.ContainsRune(name, 0):
		return codelotse.Errorf(codelotse.Invalid, "the repository archive has an entry whose path contains a NUL byte")
	}
	for _, part := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		switch part {
		case "..":
			return codelotse.Errorf(codelotse.Invalid, "the repository archive has an entry whose path contains \"..\": %q", name)
		case "", ".":
			return codelotse.Errorf(codelotse.Invalid, "the repository archive has an entry with an unclean path %q", name)
		}
	}
	return nil
}

// isFullObjectID reports whether s is a full git object id: 40 hex digits
// (SHA-1) or 64 (SHA-256).
func isFullObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// boundedReader fails, rather than ends, once more than left bytes have
// been read, so a too-large archive is an error and never a silently
// truncated snapshot.
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One more byte tells "exactly at the bound" from "beyond it".
		var one [1]byte
		n, err := b.r.Read(one[:])
		if n > 0 {
			return 0, errTarballTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
