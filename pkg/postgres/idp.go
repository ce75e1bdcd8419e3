package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// IdentityProvider is a tenant's OIDC provider.
type IdentityProvider struct {
	ID           string
	Issuer       string
	ClientID     string
	ClientSecret string
	GroupsClaim  string
	Scopes       []string
	Enabled      bool
}

// UpsertIdentityProvider adds a provider, or updates the one with the same
// issuer (and enables it), with an audit event.
func (tx *Tx) UpsertIdentityProvider(ctx context.Context, p IdentityProvider, actor Actor) (_ IdentityProvider, err error) {
	defer wrap(&err, "postgres.UpsertIdentityProvider")
	tenantID := tx.tenantID
	if p.GroupsClaim == "" {
		p.GroupsClaim = "groups"
	}
	if len(p.Scopes) == 0 {
		p.Scopes = []string{"openid", "email", "profile", "groups"}
	}
	err = tx.q.QueryRow(ctx, `INSERT INTO identity_providers (tenant_id, issuer, client_id, client_secret, groups_claim, scopes, enabled)
		VALUES ($1, $2, $3, $4, $5, $6, true)
		ON CONFLICT (tenant_id, issuer) DO UPDATE SET client_id = EXCLUDED.client_id, client_secret = EXCLUDED.client_secret,
			groups_claim = EXCLUDED.groups_claim, scopes = EXCLUDED.scopes, enabled = true
		RETURNING id::text, enabled`, tenantID, p.Issuer, p.ClientID, p.ClientSecret, p.GroupsClaim, p.Scopes).Scan(&p.ID, &p.Enabled)
	if err != nil {
		return p, err
	}
	return p, tx.insertAudit(ctx, actor, "idp.saved", p.Issuer, map[string]any{"client_id": p.ClientID, "groups_claim": p.GroupsClaim})
}

// ChangeIdentityProviderIssuer gives provider id another issuer, keeping its
// group mappings, with an audit event. Only while nobody has signed in
// through it: a user is the provider's subject, and a subject is the
// issuer's (the same subject at another issuer is another person), so a
// provider in use is refused with Conflict and nothing changes. This is
// the admin page's correction of a mistyped issuer; moving a tenant whose
// people signed in to another provider is not supported (docs/operations.md).
func (tx *Tx) ChangeIdentityProviderIssuer(ctx context.Context, id, issuer string, actor Actor) (err error) {
	defer wrap(&err, "postgres.ChangeIdentityProviderIssuer")
	tenantID := tx.tenantID
	var old string
	var inUse bool
	err = tx.q.QueryRow(ctx, `SELECT p.issuer, EXISTS (SELECT 1 FROM users u WHERE u.tenant_id = p.tenant_id AND u.idp_id = p.id)
		FROM identity_providers p WHERE p.tenant_id = $1 AND p.id = $2 FOR UPDATE OF p`, tenantID, id).Scan(&old, &inUse)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return codelotse.Errorf(codelotse.NotFound, "identity provider not found")
	case err != nil:
		return err
	case old == issuer:
		return nil
	case inUse:
		return codelotse.Errorf(codelotse.Conflict, "People have signed in through %s, so its issuer cannot be changed: their accounts belong to it (the same subject at another issuer is another person). Nothing was saved.", old)
	}
	_, err = tx.q.Exec(ctx, `UPDATE identity_providers SET issuer = $3 WHERE tenant_id = $1 AND id = $2`, tenantID, id, issuer)
	if isUniqueViolation(err, "") {
		return codelotse.Errorf(codelotse.Conflict, "This organisation already has a provider with issuer %s.", issuer)
	}
	if err != nil {
		return err
	}
	return tx.insertAudit(ctx, actor, "idp.issuer_changed", issuer, map[string]any{"from": old})
}

// IdentityProviderByIssuer finds a provider; issuer "" means the tenant's
// only provider.
func (tx *Tx) IdentityProviderByIssuer(ctx context.Context, issuer string) (_ IdentityProvider, err error) {
	defer wrap(&err, "postgres.IdentityProviderByIssuer")
	tenantID := tx.tenantID
	rows, err := tx.q.Query(ctx, `SELECT id::text, issuer, client_id, client_secret, groups_claim, scopes, enabled
		FROM identity_providers WHERE tenant_id = $1 AND ($2 = '' OR issuer = $2) ORDER BY created_at`, tenantID, strings.TrimRight(issuer, "/"))
	if err != nil {
		return IdentityProvider{}, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (IdentityProvider, error) {
		var p IdentityProvider
		return p, r.Scan(&p.ID, &p.Issuer, &p.ClientID, &p.ClientSecret, &p.GroupsClaim, &p.Scopes, &p.Enabled)
	})
	switch {
	case err != nil:
		return IdentityProvider{}, err
	case len(list) == 0 && issuer == "":
		return IdentityProvider{}, codelotse.Errorf(codelotse.NotFound, "this tenant has no identity provider")
	case len(list) == 0:
		return IdentityProvider{}, codelotse.Errorf(codelotse.NotFound, "no identity provider with issuer %s in this tenant", issuer)
	case len(list) > 1:
		return IdentityProvider{}, codelotse.Errorf(codelotse.Invalid, "this tenant has %d identity providers; name one with its issuer", len(list))
	}
	return list[0], nil
}

// SetIdentityProviderEnabled enables or disables a provider. Disabling
// applies at once: tokens created through it stop authenticating.
func (tx *Tx) SetIdentityProviderEnabled(ctx context.Context, id string, enabled bool, actor Actor) (err error) {
	defer wrap(&err, "postgres.SetIdentityProviderEnabled")
	tenantID := tx.tenantID
	var issuer string
	err = tx.q.QueryRow(ctx, `UPDATE identity_providers SET enabled = $3 WHERE tenant_id = $1 AND id = $2 RETURNING issuer`,
		tenantID, id, enabled).Scan(&issuer)
	if errors.Is(err, pgx.ErrNoRows) {
		return codelotse.Errorf(codelotse.NotFound, "identity provider not found")
	}
	if err != nil {
		return err
	}
	action := "idp.disabled"
	if enabled {
		action = "idp.enabled"
	}
	return tx.insertAudit(ctx, actor, action, issuer, nil)
}

// AddGroupMapping maps a group to a role (and optionally a repository).
func (tx *Tx) AddGroupMapping(ctx context.Context, idpID string, m codelotse.GroupMapping, actor Actor) (err error) {
	defer wrap(&err, "postgres.AddGroupMapping")
	tenantID := tx.tenantID
	_, err = tx.q.Exec(ctx, `INSERT INTO oidc_group_mappings (tenant_id, idp_id, group_name, role, repository_id)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, tenantID, idpID, m.Group, string(m.Role), m.RepositoryID)
	if isCheckViolation(err) {
		return codelotse.Errorf(codelotse.Invalid, "group must be 1-300 characters")
	}
	if err != nil {
		return err
	}
	return tx.insertAudit(ctx, actor, "idp.mapping_added", m.Group, map[string]any{"role": m.Role, "repository_id": m.RepositoryID})
}

// RemoveGroupMappings removes the mappings of a group (optionally only of
// one role or repository). It applies on the next request of every token.
func (tx *Tx) RemoveGroupMappings(ctx context.Context, idpID, group, role string, repoID *int64, actor Actor) (_ int, err error) {
	defer wrap(&err, "postgres.RemoveGroupMappings")
	tenantID := tx.tenantID
	tag, err := tx.q.Exec(ctx, `DELETE FROM oidc_group_mappings WHERE tenant_id = $1 AND idp_id = $2 AND group_name = $3
		AND ($4 = '' OR role = $4) AND ($5::bigint IS NULL OR repository_id = $5)`, tenantID, idpID, group, role, repoID)
	if err != nil {
		return 0, err
	}
	if tag.RowsAffected() == 0 {
		return 0, codelotse.Errorf(codelotse.NotFound, "no mapping of group %q matches", group)
	}
	return int(tag.RowsAffected()), tx.insertAudit(ctx, actor, "idp.mapping_removed", group, map[string]any{"removed": tag.RowsAffected()})
}

// ReplaceGroupSnapshot replaces the IdP groups snapshot on the user's active
// tokens of the tenant that were created through the provider. Every
// sign-in through that provider calls it, so group changes reach tokens at
// the next sign-in.
func (tx *Tx) ReplaceGroupSnapshot(ctx context.Context, userID, idpID string, groups []string) (_ int, err error) {
	defer wrap(&err, "postgres.ReplaceGroupSnapshot")
	tenantID := tx.tenantID
	if groups == nil {
		groups = []string{}
	}
	tag, err := tx.q.Exec(ctx, `UPDATE mcp_tokens SET idp_groups = $4
		WHERE tenant_id = $1 AND user_id = $2 AND idp_id = $3 AND revoked_at IS NULL AND expires_at > now()`,
		tenantID, userID, idpID, groups)
	if err != nil {
		return 0, err
	}
	// OAuth grants carry the snapshot into the access tokens they issue
	// later (their current access tokens were updated above).
	_, err = tx.q.Exec(ctx, `UPDATE oauth_grants SET idp_groups = $4
		WHERE tenant_id = $1 AND user_id = $2 AND idp_id = $3 AND revoked_at IS NULL AND expires_at > now()`,
		tenantID, userID, idpID, groups)
	return int(tag.RowsAffected()), err
}

// ExpireMembership makes a user's cached GitHub membership stale, so their
// tokens answer 401 until the next sign-in (support and tests; webhooks of
// removed members do the same).
func (tx *Tx) ExpireMembership(ctx context.Context, userID string, actor Actor) (err error) {
	defer wrap(&err, "postgres.ExpireMembership")
	tenantID := tx.tenantID
	tag, err := tx.q.Exec(ctx, `UPDATE tenant_memberships SET refreshed_at = 'epoch' WHERE tenant_id = $1 AND user_id = $2`, tenantID, userID)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return codelotse.Errorf(codelotse.NotFound, "the user has no cached membership")
	}
	return tx.insertAudit(ctx, actor, "membership.expired", userID, nil)
}

// AuditMappingRemoved records the removal of one mapping by id.
func (tx *Tx) AuditMappingRemoved(ctx context.Context, group string, actor Actor) (err error) {
	defer wrap(&err, "postgres.AuditMappingRemoved")
	return tx.insertAudit(ctx, actor, "idp.mapping_removed", group, nil)
}

// GroupMappingRow is one group mapping as the admin page lists it, with the
// repository's name ("" for a tenant-wide mapping).
type GroupMappingRow struct {
	ID                int64
	Group, Role, Repo string
}

// ListGroupMappings lists the tenant's group mappings by group, role and
// repository.
func (tx *Tx) ListGroupMappings(ctx context.Context) (_ []GroupMappingRow, err error) {
	defer wrap(&err, "postgres.ListGroupMappings")
	rows, err := tx.q.Query(ctx, `SELECT m.id, m.group_name, m.role, coalesce(r.full_name, '')
		FROM oidc_group_mappings m LEFT JOIN repositories r ON r.tenant_id = m.tenant_id AND r.id = m.repository_id
		WHERE m.tenant_id = $1 ORDER BY m.group_name, m.role, r.full_name`, tx.tenantID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (GroupMappingRow, error) {
		var m GroupMappingRow
		return m, r.Scan(&m.ID, &m.Group, &m.Role, &m.Repo)
	})
}

// DeleteGroupMapping removes one group mapping and returns its group. A
// mapping that does not exist (or belongs to another tenant) is NotFound;
// any other failure is returned as it is.
func (tx *Tx) DeleteGroupMapping(ctx context.Context, id int64) (group string, err error) {
	defer wrap(&err, "postgres.DeleteGroupMapping")
	err = tx.q.QueryRow(ctx, `DELETE FROM oidc_group_mappings WHERE tenant_id = $1 AND id = $2 RETURNING group_name`, tx.tenantID, id).Scan(&group)
	return group, notFound(err, "No such mapping.")
}
