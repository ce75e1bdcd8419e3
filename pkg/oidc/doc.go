// Package oidc signs a member in with their tenant's OpenID Connect identity
// provider: AuthURL starts the authorization code flow (state, nonce and a
// PKCE S256 challenge), and Finish exchanges the code, verifies the ID token
// and returns the few claims CodeLotse needs: subject, email, name and the
// IdP groups that the web layer snapshots onto the user's tokens.
//
// It is the only importer of github.com/coreos/go-oidc/v3 (discovery, key
// sets, ID-token verification), so an upgrade or a change of library touches
// one place; golang.org/x/oauth2 does the code exchange here, as it does for
// GitHub in pkg/githubapp.
//
// What it must never do:
//
//   - store or log a token, code or PKCE verifier. The ID token, the access
//     token and any refresh token live only inside Finish and are dropped when
//     it returns; every error it returns has them (and the client secret)
//     removed, so a caller may log any error from this package as it is.
//   - keep sign-in state. State, nonce and verifier belong to the caller's
//     session between AuthURL and Finish; this package only checks them.
//   - trust an unverified claim. Claims come from an ID token whose issuer,
//     audience, expiry, signature and nonce were checked, or from the userinfo
//     endpoint of the same provider for the same subject.
//
// What it does keep is public: each issuer's discovery document, and through
// go-oidc's remote key set its signing keys, cached per issuer for
// DiscoveryTTL so that a sign-in costs the provider one token request.
package oidc
