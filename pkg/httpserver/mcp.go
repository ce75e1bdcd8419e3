package httpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/mcpserver"
	"github.com/codelotse/codelotse/pkg/ratelimit"
)

// unauthorizedBody is the exact JSON-RPC body of every 401 (ARCHITECTURE §4).
const unauthorizedBody = `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Unauthorized"}}`

// refreshDescription is the error_description when a web sign-in would
// restore access (stale or missing GitHub membership cache).
const refreshDescription = "sign in to CodeLotse to refresh access"

// failureDescriptions are the error_description of each refusal, written so
// that the person behind the agent knows what to do next. They may tell the
// token's state (revoked, expired, ...) because only someone who holds a
// token can present one that exists: a guessed token is "unknown" like any
// other. They never name a tenant, a user or a repository. RFC 6750 allows
// only printable ASCII without '"' and '\' here. (docs/decisions.md, issue 14.)
var failureDescriptions = map[string]string{
	"missing":                     "send the header Authorization: Bearer clt_... with a token from the MCP access page",
	"malformed":                   "the Authorization header must be Bearer followed by one space and the whole clt_ token",
	"unknown":                     "token not recognised: copy the whole token again, or create a new one on the MCP access page",
	"revoked":                     "this token was revoked: create a new one on the MCP access page",
	"expired":                     "this token has expired: create a new one on the MCP access page",
	"user_deleted":                "the account of this token no longer belongs to the organisation",
	"mcp_disabled":                "MCP access is switched off for this organisation: ask a tenant admin to switch it on",
	"idp_disabled":                "the identity provider of this token is disabled: ask a tenant admin, or create a token after signing in again",
	"no_grants_no_mapping":        "your identity-provider groups grant no access here: ask a tenant admin to map one of them",
	"no_grants_provider_disabled": "the identity provider of this token is disabled: ask a tenant admin, or create a token after signing in again",
}

// failureDescription is the error_description of a refusal ("" when none).
func failureDescription(f *authn.Failure) string {
	if f.Refresh {
		return refreshDescription
	}
	return failureDescriptions[f.Reason]
}

// mcpPost is POST /mcp, in the order of checks of ARCHITECTURE §4: body
// size and Origin, (rate limit), token, grants; then the MCP endpoint of
// pkg/mcpserver for the authenticated caller.
func (s *Server) mcpPost(c echo.Context) error {
	r := c.Request()
	w := c.Response()

	// 1. Body over 1 MiB → 413; a foreign Origin → 403.
	if r.ContentLength > MaxBodyBytes {
		return jsonRPCError(c, http.StatusRequestEntityTooLarge, -32600, "Request body too large: the limit is 1 MiB.")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return jsonRPCError(c, http.StatusRequestEntityTooLarge, -32600, "Request body too large: the limit is 1 MiB.")
		}
		return jsonRPCError(c, http.StatusBadRequest, -32700, "Could not read the request body.")
	}
	if o := r.Header.Get("Origin"); o != "" && !s.originAllowed(o) {
		return jsonRPCError(c, http.StatusForbidden, -32000, "Forbidden: requests from this origin are not allowed.")
	}

	// 2. Per-IP limit, before anything touches the database.
	if d := s.limit(c, "ip:"+c.RealIP(), s.cfg.Limits.PerIP); !d.Allowed {
		s.tel.Limited(r.Context(), "ip")
		return tooManyRequests(c, d)
	}

	// Past saturation a request is shed before it touches the database:
	// a queue would only make every caller wait for answers that come
	// late. The slot is taken only once the body is read and the per-IP
	// limit passed, so slow or unlimited anonymous senders cannot hold the
	// slots that authenticated work needs.
	select {
	case s.mcpSlots <- struct{}{}:
		defer func() { <-s.mcpSlots }()
	default:
		s.tel.Limited(r.Context(), "busy")
		c.Response().Header().Set("Retry-After", "1")
		return jsonRPCError(c, http.StatusServiceUnavailable, mcpserver.CodeUnavailable, BusyMessage)
	}

	// 3, 4. Token, its state, the tenant switch (and the grant inputs).
	// A token accepted recently is let through on the facts of then, and
	// looked up again in the pipeline of the tool's first read; the
	// answer leaves only if the decision on the fresh facts is the same
	// (authn.AuthenticateAhead). If it is not, the request is
	// authenticated again from scratch and served anew: the second pass
	// has no pending confirmation, so there is no third.
	res, pending, err := s.authenticate(c, true)
	for pass := 1; ; pass++ {
		if err != nil {
			s.cfg.Logger.Error("authenticating a token failed", "err", err)
			return unavailable(c)
		}
		if res.Failure != nil {
			s.cfg.Logger.Info("bearer request refused", "reason", res.Failure.Reason)
			s.tel.Refused(r.Context(), res.Failure.Reason)
			return s.unauthorized(c, res.Failure)
		}
		// 5. Per-token limit, keyed on tenant and token digest, or on the
		// grant of an OAuth access token (authn.Result.Digest), once: the
		// digest does not change between passes.
		if pass == 1 {
			if d := s.limit(c, "token:"+res.Digest, s.cfg.Limits.PerToken); !d.Allowed {
				if pending != nil {
					// A 429 leaves without a tool's answer, so nothing
					// would confirm the cached facts: look the token up
					// now, so that a refusal still comes first.
					if fresh, _, ferr := s.authenticate(c, false); ferr != nil || fresh.Failure != nil {
						res, pending, err = fresh, nil, ferr
						continue // answered above: 503 or the refusal
					}
				}
				s.tel.Limited(r.Context(), "token")
				return tooManyRequests(c, d)
			}
		}
		// 6. Grants.
		if res.GrantFailure != nil {
			s.cfg.Logger.Info("bearer request refused", "reason", res.GrantFailure.Reason)
			s.tel.Refused(r.Context(), res.GrantFailure.Reason)
			return s.unauthorized(c, res.GrantFailure)
		}
		// Everything MCP — the message, its protocol errors, the server
		// for this request, the bounded answer — is the endpoint's; it
		// serves only the caller authenticated here, with the body
		// already read above.
		caller := mcpserver.Caller{Principal: res.Principal, Grants: res.Grants}
		req := r
		if pending != nil {
			p := pending
			caller.Confirm = func(ctx context.Context) error {
				ok, err := p.Confirm(ctx)
				if err == nil && !ok {
					return mcpserver.ErrCallerChanged
				}
				return err
			}
			req = r.WithContext(p.Context(r.Context()))
		}
		if s.mcp.Serve(w, req, caller, body) == nil {
			return nil
		}
		s.cfg.Logger.Info("token facts changed since they were cached; authenticating again")
		res, pending, err = s.authenticate(c, false)
	}
}

func (s *Server) originAllowed(o string) bool {
	n, err := origin(o)
	return err == nil && s.origins[n]
}

// unauthorized writes the 401 of ARCHITECTURE §4.
func (s *Server) unauthorized(c echo.Context, f *authn.Failure) error {
	v := `Bearer realm="codelotse", error="invalid_token"`
	if d := failureDescription(f); d != "" {
		v += fmt.Sprintf(`, error_description=%q`, d)
	}
	// Only an endpoint with an authorization server names its metadata
	// (ARCHITECTURE §4: complete discovery or none).
	if md := s.resourceMetadataOf(c); md != "" {
		v += fmt.Sprintf(`, resource_metadata=%q`, md)
	}
	c.Response().Header().Set("WWW-Authenticate", v)
	return c.Blob(http.StatusUnauthorized, "application/json", []byte(unauthorizedBody))
}

// BusyMessage is the error of a /mcp request shed under load.
const BusyMessage = "Service busy: too many requests are in progress; try again in a second."

// unavailable answers a request whose authentication failed because the
// database cannot be reached: 503 with Retry-After and the JSON-RPC error
// that the MCP endpoint gives when the outage strikes a tool, so a client
// sees one answer for one cause (never a 500 or an "Internal error").
func unavailable(c echo.Context) error {
	c.Response().Header().Set("Retry-After", "1")
	return jsonRPCError(c, http.StatusServiceUnavailable, mcpserver.CodeUnavailable, mcpserver.UnavailableMessage)
}

// jsonRPCError answers with a JSON-RPC error body and an HTTP status.
func jsonRPCError(c echo.Context, status, code int, msg string) error {
	return c.JSON(status, map[string]any{
		"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": msg},
	})
}

// limit applies a rate-limit rule. A limiter failure fails open and is
// logged: an unavailable Redis must not take the endpoint down or turn into
// a 500.
func (s *Server) limit(c echo.Context, key string, rule ratelimit.Rule) ratelimit.Decision {
	return s.limitBucket(c, "mcp:"+key, rule)
}

// limitBucket applies rule to a key that names its bucket.
func (s *Server) limitBucket(c echo.Context, key string, rule ratelimit.Rule) ratelimit.Decision {
	if s.cfg.Limiter == nil || rule.Limit <= 0 {
		return ratelimit.Decision{Allowed: true}
	}
	d, err := s.cfg.Limiter.Allow(c.Request().Context(), key, rule)
	if err != nil {
		s.cfg.Logger.Warn("rate limiter failed; allowing the request", "err", err)
		return ratelimit.Decision{Allowed: true}
	}
	return d
}

// tooManyRequests writes a 429 with Retry-After (whole seconds, rounded up)
// and a JSON-RPC error that says when to retry.
func tooManyRequests(c echo.Context, d ratelimit.Decision) error {
	secs := int(math.Ceil(d.RetryAfter.Seconds()))
	if secs < 1 {
		secs = 1
	}
	c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
	return jsonRPCError(c, http.StatusTooManyRequests, -32000,
		fmt.Sprintf("Rate limit exceeded: too many requests; retry after %d second%s.", secs, plural(secs)))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
