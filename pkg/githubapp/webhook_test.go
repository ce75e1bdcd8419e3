package githubapp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
)

// TestParsePushReadsTheNewHead: a push's after commit is read, so that the
// index job of each push is its own (jobs.IndexRepositoryArgs.Commit).
func TestParsePushReadsTheNewHead(t *testing.T) {
	secret := []byte("s3cret-for-the-test")
	body := []byte(`{"ref":"refs/heads/main","after":"c0ffee2222222222222222222222222222222222",` +
		`"installation":{"id":3001},"repository":{"id":4001,"full_name":"acme-org/api","default_branch":"main"}}`)
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	h := http.Header{}
	h.Set("X-GitHub-Event", "push")
	h.Set("X-GitHub-Delivery", "d-1")
	h.Set("Content-Type", "application/json")
	h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	ev, err := ParseWebhook(secret, h, body)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Ref != "refs/heads/main" || ev.After != "c0ffee2222222222222222222222222222222222" || ev.RepoID != 4001 || ev.DefaultBranch != "main" {
		t.Errorf("parsed %+v", ev)
	}
}
