package codeindex

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strconv"
	"strings"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// File is one file of a repository at a commit.
type File struct {
	Path     string
	Size     int64
	BlobSHA  string
	Language string
	// Lines is the content split into lines; nil when skipped.
	Lines []string
	// SkipReason is "binary" or "too large" for files that are listed but
	// not indexed.
	SkipReason string
}

// Snapshot is a repository's content at one commit.
type Snapshot struct {
	Commit string
	Files  []File
}

// ReadGit reads the tree of ref (default HEAD) from the git checkout or bare
// repository at dir, with git itself: `git rev-parse`, `git ls-tree` and one
// `git cat-file --batch` stream. Submodules and symbolic links are not
// content and are left out.
func ReadGit(ctx context.Context, dir, ref string) (Snapshot, error) {
	if ref == "" {
		ref = "HEAD"
	}
	if strings.HasPrefix(ref, "-") {
		return Snapshot{}, codelotse.Errorf(codelotse.Invalid, "ref %q must not start with '-'", ref)
	}
	out, err := git(ctx, dir, nil, "rev-parse", "--verify", "--end-of-options", ref+"^{commit}")
	if err != nil {
		return Snapshot{}, codelotse.Wrap(codelotse.Invalid, err, fmt.Sprintf("%s is not a git repository with a commit %q", dir, ref))
	}
	snap := Snapshot{Commit: strings.TrimSpace(string(out))}

	out, err = git(ctx, dir, nil, "ls-tree", "-r", "-l", "-z", "--full-tree", snap.Commit)
	if err != nil {
		return Snapshot{}, codelotse.Wrap(codelotse.Internal, err, "git ls-tree failed")
	}
	var want []int // indexes of files to read
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		// <mode> SP <type> SP <object> SP+ <size> TAB <path>
		meta, p, ok := bytes.Cut(rec, []byte{'\t'})
		if !ok {
			continue
		}
		f := strings.Fields(string(meta))
		if len(f) != 4 || f[1] != "blob" || f[0] == "120000" {
			continue // submodule (commit) or symlink
		}
		size, _ := strconv.ParseInt(f[3], 10, 64)
		file := File{Path: string(p), Size: size, BlobSHA: f[2], Language: Language(string(p))}
		if size > MaxFileBytes {
			file.SkipReason = "too large"
		}
		snap.Files = append(snap.Files, file)
	}
	sort.SliceStable(snap.Files, func(i, j int) bool { return snap.Files[i].Path < snap.Files[j].Path })
	for i, f := range snap.Files {
		if f.SkipReason == "" {
			want = append(want, i)
		}
	}
	if len(want) == 0 {
		return snap, nil
	}

	// Stream every wanted blob through one cat-file process.
	var in bytes.Buffer
	for _, i := range want {
		in.WriteString(snap.Files[i].BlobSHA + "\n")
	}
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "cat-file", "--batch")
	cmd.Stdin = &in
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return Snapshot{}, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return Snapshot{}, codelotse.Wrap(codelotse.Internal, err, "cannot run git")
	}
	r := bufio.NewReaderSize(stdout, 1<<20)
	for _, i := range want {
		header, err := r.ReadString('\n')
		if err != nil {
			_ = cmd.Wait()
			return Snapshot{}, codelotse.Wrap(codelotse.Internal, fmt.Errorf("%v: %s", err, stderr.String()), "git cat-file failed")
		}
		hf := strings.Fields(header)
		if len(hf) != 3 {
			_ = cmd.Wait()
			return Snapshot{}, codelotse.Errorf(codelotse.Internal, "git cat-file: unexpected header %q", header)
		}
		n, _ := strconv.Atoi(hf[2])
		buf := make([]byte, n+1) // content and the trailing newline
		if _, err := io.ReadFull(r, buf); err != nil {
			_ = cmd.Wait()
			return Snapshot{}, codelotse.Wrap(codelotse.Internal, err, "git cat-file failed")
		}
		content := buf[:n]
		f := &snap.Files[i]
		if IsBinary(content) {
			f.SkipReason = "binary"
			continue
		}
		// PostgreSQL text must be valid UTF-8: invalid bytes become U+FFFD.
		f.Lines = SplitLines(string(bytes.ToValidUTF8(content, []byte("\uFFFD"))))
	}
	if err := cmd.Wait(); err != nil {
		return Snapshot{}, codelotse.Wrap(codelotse.Internal, fmt.Errorf("%v: %s", err, stderr.String()), "git cat-file failed")
	}
	return snap, nil
}

func git(ctx context.Context, dir string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
