package githubapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// MaxArchiveBytes bounds a downloaded repository archive (compressed). The
// code index refuses more than 2 GiB uncompressed anyway (see
// codeindex.ReadTarball), and gzip seldom compresses source less than
// two to one.
const MaxArchiveBytes = 1 << 30

// archiveIdleTimeout fails a download that delivers no byte for this long:
// a stalled connection would otherwise hold the sync job until its
// context ends, and a large archive may rightly take longer than any fixed
// timeout.
const archiveIdleTimeout = 2 * time.Minute

// ErrArchiveTooLarge is matched (errors.Is) by the read error of an archive
// larger than MaxArchiveBytes.
var ErrArchiveTooLarge = errors.New("repository archive too large")

// Archive downloads the repository's tarball at ref (a commit id, branch
// or tag; empty for the default branch) as GitHub serves it: a gzip tar
// with one top directory "owner-repo-shortsha/", for codeindex.ReadTarball.
//
// GitHub answers GET /repos/{owner}/{repo}/tarball/{ref} with a redirect
// to codeload, whose URL carries its own short-lived token. That URL is
// fetched without the installation token, even on the API's own host: the
// installation token is only ever sent to the API. The redirect target
// must be http(s), and https when the API is.
//
// The caller reads and closes the stream. Reading fails with
// ErrArchiveTooLarge past MaxArchiveBytes, with an error when the download
// stalls for two minutes, and when ctx ends. The requests before the
// stream starts are retried like every GET; a stream that fails midway is
// not resumed.
func (c *InstallationClient) Archive(ctx context.Context, fullName, ref string) (io.ReadCloser, error) {
	base, err := c.repoPath(fullName)
	if err != nil {
		return nil, err
	}
	path := base + "/tarball"
	if ref != "" {
		if err := checkRef(ref); err != nil {
			return nil, err
		}
		path += "/" + ref
	}
	op := "GET /" + path

	// One context for the whole download, cancelled when it stalls or
	// when the caller closes the stream.
	dctx, cancel := context.WithCancel(ctx)
	body := &archiveBody{op: op, cancel: cancel, idle: c.app.archiveIdle, max: c.app.maxArchive, left: c.app.maxArchive}
	body.timer = time.AfterFunc(body.idle, body.stall)
	ok := false
	defer func() {
		if !ok {
			body.stop()
		}
	}()

	resp, _, err := c.app.do(dctx, &request{op: op, url: c.app.endpoint(path, nil), cred: c, limit: &c.st.limit, stream: true})
	if err != nil {
		return nil, body.explain(err)
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		loc, lerr := resp.Location()
		resp.Body.Close()
		if lerr != nil {
			return nil, codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: a redirect without a usable Location", op),
				"GitHub did not say where to download the repository archive; try again in a moment")
		}
		if err := c.checkDownloadURL(loc); err != nil {
			return nil, codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: %w", op, err),
				"GitHub redirected the repository archive download somewhere CodeLotse will not follow")
		}
		// No cred, no limit: codeload authenticates by the URL's token
		// and is not rate limited like the API.
		resp, _, err = c.app.do(dctx, &request{op: op + " (download)", url: loc.String(), accept: "application/x-gzip, */*", follow: true, stream: true})
		if err != nil {
			return nil, body.explain(err)
		}
	}
	if resp.ContentLength > body.left {
		resp.Body.Close()
		return nil, codelotse.Wrap(codelotse.Invalid, fmt.Errorf("githubapp: %s: %w: %d bytes, more than %d", op, ErrArchiveTooLarge, resp.ContentLength, body.max),
			fmt.Sprintf("the repository archive is larger than %s; it is too large to index", mib(body.max)))
	}
	body.body = resp.Body
	body.timer.Reset(body.idle)
	ok = true
	return body, nil
}

// checkDownloadURL accepts a codeload redirect target: absolute http(s),
// without credentials, and not downgraded from https.
func (c *InstallationClient) checkDownloadURL(u *url.URL) error {
	switch {
	case u.Scheme != "https" && u.Scheme != "http" || u.Host == "":
		return errors.New("the redirect target is not an http(s) URL")
	case u.Scheme == "http" && c.app.apiURL.Scheme == "https":
		return errors.New("the redirect target downgrades https to http")
	case u.User != nil:
		return errors.New("the redirect target has credentials in it")
	}
	return nil
}

// archiveBody is the download stream: size-limited, watched for stalls,
// and tied to its own context, which Close cancels.
type archiveBody struct {
	body   io.ReadCloser
	op     string
	cancel context.CancelFunc
	timer  *time.Timer
	idle   time.Duration
	// max is the size limit; left is what remains of it.
	max, left int64
	over      bool

	stalled   atomic.Bool
	closeOnce sync.Once
}

func (b *archiveBody) stall() {
	b.stalled.Store(true)
	b.cancel()
}

func (b *archiveBody) stop() {
	b.closeOnce.Do(func() {
		b.timer.Stop()
		b.cancel()
	})
}

// explain replaces the context error a stall causes with what happened.
func (b *archiveBody) explain(err error) error {
	if b.stalled.Load() {
		return codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: no data for %s: %w", b.op, b.idle, err),
			"the repository archive download stalled; try again in a moment")
	}
	return err
}

func (b *archiveBody) Read(p []byte) (int, error) {
	if b.over {
		return 0, b.tooLarge()
	}
	// Read one byte beyond the limit to tell "exactly at it" from "over".
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.body.Read(p)
	if n > 0 {
		b.timer.Reset(b.idle)
	}
	if int64(n) > b.left {
		n, b.left, b.over = int(b.left), 0, true
		return n, b.tooLarge()
	}
	b.left -= int64(n)
	if err != nil && err != io.EOF {
		// The transport's error may quote the download URL, whose query
		// is a token.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if b.stalled.Load() {
			return n, b.explain(err)
		}
		return n, codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: reading the archive: %w", b.op, err),
			"the repository archive download failed; try again in a moment")
	}
	return n, err
}

func (b *archiveBody) tooLarge() error {
	return codelotse.Wrap(codelotse.Invalid, fmt.Errorf("githubapp: %s: %w: more than %d bytes", b.op, ErrArchiveTooLarge, b.max),
		fmt.Sprintf("the repository archive is larger than %s; it is too large to index", mib(b.max)))
}

func (b *archiveBody) Close() error {
	b.stop()
	return b.body.Close()
}

func mib(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
