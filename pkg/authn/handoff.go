package authn

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"net/http"
)

// errNoSession: sealing needs the request's session cookie.
var errNoSession = errors.New("no session cookie to seal the token handoff with")

// handoffKey derives the AES-256 key of a token handoff from the value of
// the request's session cookie. Only the SHA-256 of that value is stored
// (web_sessions), so the key exists only in the browser's cookie and in the
// two requests that carry it.
func (s *Sessions) handoffKey(r *http.Request) ([]byte, error) {
	c, err := r.Cookie(s.CookieName())
	if err != nil || c.Value == "" {
		return nil, errNoSession
	}
	m := hmac.New(sha256.New, []byte(c.Value))
	m.Write([]byte("codelotse token handoff v1"))
	return m.Sum(nil), nil
}

// SealHandoff encrypts a freshly created token for the page view that shows
// it: nonce || AES-GCM ciphertext, under the session's handoff key.
func (s *Sessions) SealHandoff(r *http.Request, secret string) ([]byte, error) {
	gcm, err := s.handoffAEAD(r)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return gcm.Seal(nonce, nonce, []byte(secret), nil), nil
}

// OpenHandoff decrypts what SealHandoff sealed in the same browser session.
func (s *Sessions) OpenHandoff(r *http.Request, sealed []byte) (string, error) {
	gcm, err := s.handoffAEAD(r)
	if err != nil {
		return "", err
	}
	if len(sealed) < gcm.NonceSize() {
		return "", errors.New("token handoff is too short")
	}
	plain, err := gcm.Open(nil, sealed[:gcm.NonceSize()], sealed[gcm.NonceSize():], nil)
	return string(plain), err
}

func (s *Sessions) handoffAEAD(r *http.Request) (cipher.AEAD, error) {
	key, err := s.handoffKey(r)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
