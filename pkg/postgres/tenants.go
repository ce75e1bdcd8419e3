package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// slugPattern is the CHECK of tenants.slug (migration 0001).
var slugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidSlug reports whether s has the shape of a tenant slug; nothing else
// can name a tenant (and a URL's slug can hold anything, even a NUL byte,
// which PostgreSQL refuses in text).
func ValidSlug(s string) bool { return slugPattern.MatchString(s) }

// TenantIDBySlug resolves a slug through the auth.signin function, the one
// cross-tenant read allowed before a tenant is known.
func (db *DB) TenantIDBySlug(ctx context.Context, slug string) (_ string, err error) {
	defer wrap(&err, "postgres.TenantIDBySlug")
	// A slug from a URL can hold anything (%00 decodes to a NUL byte, which
	// PostgreSQL refuses in text); only the shape the schema allows can name
	// a tenant, so anything else is simply not found.
	if !slugPattern.MatchString(slug) {
		return "", codelotse.Errorf(codelotse.NotFound, "no tenant with that slug")
	}
	var id *string
	if err := db.Pool.QueryRow(ctx, "SELECT tenant_id_by_slug($1)::text", slug).Scan(&id); err != nil {
		return "", err
	}
	if id == nil {
		return "", codelotse.Errorf(codelotse.NotFound, "no tenant with slug %q", slug)
	}
	return *id, nil
}

// NewTenant is what CreateTenant needs.
type NewTenant struct {
	Slug                 string
	Name                 string
	MCPEnabled           bool
	GitHubInstallationID *int64
}

// CreateTenant creates a tenant and its settings row. The new id is chosen
// first so that the insert itself runs under the tenant policy.
func (db *DB) CreateTenant(ctx context.Context, nt NewTenant, actor string) (_ codelotse.Tenant, err error) {
	defer wrap(&err, "postgres.CreateTenant")
	var t codelotse.Tenant
	if err := db.Pool.QueryRow(ctx, "SELECT gen_random_uuid()::text").Scan(&t.ID); err != nil {
		return t, err
	}
	err = db.InTenant(ctx, t.ID, func(tx *Tx) error {
		err := tx.q.QueryRow(ctx, `INSERT INTO tenants (id, slug, name, github_installation_id)
			VALUES ($1, $2, $3, $4) RETURNING slug, name, created_at`,
			t.ID, nt.Slug, nt.Name, nt.GitHubInstallationID).Scan(&t.Slug, &t.Name, &t.CreatedAt)
		switch {
		case isUniqueViolation(err, "tenants_slug_key"):
			return codelotse.Errorf(codelotse.Conflict, "a tenant with slug %q already exists", nt.Slug)
		case isUniqueViolation(err, "tenants_github_installation_id_key"):
			return codelotse.Errorf(codelotse.Conflict, "installation %d is already bound to another tenant", *nt.GitHubInstallationID)
		case isCheckViolation(err):
			return codelotse.Errorf(codelotse.Invalid, "slug must be lowercase letters, digits and dashes (1-63, starting with a letter or digit) and name 1-200 characters")
		case err != nil:
			return err
		}
		if _, err := tx.q.Exec(ctx, `INSERT INTO tenant_settings (tenant_id, settings) VALUES ($1, jsonb_build_object('mcp', jsonb_build_object('enabled', $2::boolean)))`,
			t.ID, nt.MCPEnabled); err != nil {
			return err
		}
		t.MCPEnabled = nt.MCPEnabled
		return tx.insertAudit(ctx, Actor{Label: actor}, "tenant.created", nt.Slug, map[string]any{"mcp_enabled": nt.MCPEnabled})
	})
	return t, err
}

// GetTenant reads a tenant with its MCP switch.
func (tx *Tx) GetTenant(ctx context.Context) (_ codelotse.Tenant, err error) {
	defer wrap(&err, "postgres.GetTenant")
	tenantID := tx.tenantID
	var t codelotse.Tenant
	var settings []byte
	err = tx.q.QueryRow(ctx, `SELECT t.id::text, t.slug, t.name, t.created_at, coalesce(s.settings, '{}')
		FROM tenants t LEFT JOIN tenant_settings s ON s.tenant_id = t.id WHERE t.id = $1`, tenantID).
		Scan(&t.ID, &t.Slug, &t.Name, &t.CreatedAt, &settings)
	if err != nil {
		return t, notFound(err, "tenant not found")
	}
	var s struct {
		MCP struct {
			Enabled bool `json:"enabled"`
		} `json:"mcp"`
	}
	if err := json.Unmarshal(settings, &s); err != nil {
		return t, err
	}
	t.MCPEnabled = s.MCP.Enabled
	return t, nil
}

// SetMCPEnabled switches MCP for a tenant and writes the audit event in the
// same transaction. It reports whether the value changed.
func (tx *Tx) SetMCPEnabled(ctx context.Context, enabled bool, actor Actor) (changed bool, err error) {
	defer wrap(&err, "postgres.SetMCPEnabled")
	tenantID := tx.tenantID
	var before bool
	err = tx.q.QueryRow(ctx, `SELECT coalesce((settings #>> '{mcp,enabled}')::boolean, false)
		FROM tenant_settings WHERE tenant_id = $1 FOR UPDATE`, tenantID).Scan(&before)
	if errors.Is(err, pgx.ErrNoRows) {
		_, err = tx.q.Exec(ctx, `INSERT INTO tenant_settings (tenant_id) VALUES ($1)`, tenantID)
	}
	if err != nil {
		return false, err
	}
	if _, err := tx.q.Exec(ctx, `UPDATE tenant_settings
		SET settings = jsonb_set(settings, '{mcp}', coalesce(settings->'mcp', '{}') || jsonb_build_object('enabled', $2::boolean)),
		    updated_at = now()
		WHERE tenant_id = $1`, tenantID, enabled); err != nil {
		return false, err
	}
	if before == enabled {
		return false, nil
	}
	return true, tx.insertAudit(ctx, actor, "mcp.switched", "", map[string]any{"enabled": enabled})
}

// TenantGitHub is a tenant's binding to a GitHub App installation.
type TenantGitHub struct {
	Slug           string
	InstallationID *int64
	AccountID      *int64
}

// GetTenantGitHub reads the installation binding.
func (tx *Tx) GetTenantGitHub(ctx context.Context) (_ TenantGitHub, err error) {
	defer wrap(&err, "postgres.GetTenantGitHub")
	tenantID := tx.tenantID
	var g TenantGitHub
	err = tx.q.QueryRow(ctx, `SELECT slug, github_installation_id, github_account_id FROM tenants WHERE id = $1`, tenantID).
		Scan(&g.Slug, &g.InstallationID, &g.AccountID)
	return g, notFound(err, "tenant not found")
}

// SetTenantGitHubAccount records the installation's account id the first
// time it is seen (tenants map to installations by ids, never by login).
func (tx *Tx) SetTenantGitHubAccount(ctx context.Context, accountID int64) (err error) {
	defer wrap(&err, "postgres.SetTenantGitHubAccount")
	tenantID := tx.tenantID
	_, err = tx.q.Exec(ctx, `UPDATE tenants SET github_account_id = $2 WHERE id = $1 AND github_account_id IS NULL`, tenantID, accountID)
	return err
}

// UpsertGitHubRepository registers or updates a repository seen through
// the GitHub App and returns its id.
//
// settle is for the installation sync, which read the installation's
// current list under its lock: it gives the repository its name, default
// branch, URL and private flag, and first moves aside another GitHub
// repository's row that holds the name (GitHub gives a name to one
// repository at a time, so that row was renamed, deleted or moved since
// it was stored; the same sync renames or removes it) to
// <name>.moved-<its GitHub id>.
//
// Without settle (a membership refresh, a sign-in), a repository already
// stored is returned as it is, and only a new one is stored; a new one
// whose name another GitHub repository's row holds is refused with
// codelotse.Conflict (the installation sync adds it). Their reads can be
// minutes old: a refresh that renamed on a stale read gave a live
// repository's name to another row, whose sync then read that
// repository's pull requests by name and stored them there.
func (tx *Tx) UpsertGitHubRepository(ctx context.Context, githubID int64, fullName, defaultBranch, url string, private, settle bool) (_ int64, err error) {
	defer wrap(&err, "postgres.UpsertGitHubRepository")
	tenantID := tx.tenantID
	if settle {
		if _, err := tx.q.Exec(ctx, `UPDATE repositories SET full_name = full_name || '.moved-' || github_id
			WHERE tenant_id = $1 AND name_key = lower($3) AND github_id IS NOT NULL AND github_id <> $2`,
			tenantID, githubID, fullName); err != nil {
			return 0, err
		}
	} else {
		var taken bool
		var own *int64
		if err := tx.q.QueryRow(ctx, `SELECT
				EXISTS (SELECT 1 FROM repositories WHERE tenant_id = $1 AND name_key = lower($3) AND github_id IS NOT NULL AND github_id <> $2),
				(SELECT id FROM repositories WHERE tenant_id = $1 AND github_id = $2)`,
			tenantID, githubID, fullName).Scan(&taken, &own); err != nil {
			return 0, err
		}
		if own != nil {
			return *own, nil
		}
		if taken {
			return 0, codelotse.Errorf(codelotse.Conflict, "another repository is stored as %s until the next installation sync", fullName)
		}
	}
	var id int64
	err = tx.q.QueryRow(ctx, `UPDATE repositories SET github_id = $2, full_name = $3, default_branch = coalesce(nullif($4, ''), default_branch),
			url = coalesce(nullif($5, ''), url), private = $6
		WHERE tenant_id = $1 AND (github_id = $2 OR (github_id IS NULL AND name_key = lower($3))) RETURNING id`,
		tenantID, githubID, fullName, defaultBranch, url, private).Scan(&id)
	if err == nil || !errors.Is(err, pgx.ErrNoRows) {
		return id, err
	}
	if defaultBranch == "" {
		defaultBranch = "main"
	}
	err = tx.q.QueryRow(ctx, `INSERT INTO repositories (tenant_id, github_id, full_name, default_branch, url, private)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, tenantID, githubID, fullName, defaultBranch, url, private).Scan(&id)
	return id, err
}

// AuditSignIn records a sign-in.
func (tx *Tx) AuditSignIn(ctx context.Context, userID, email, method string) (err error) {
	defer wrap(&err, "postgres.AuditSignIn")
	return tx.insertAudit(ctx, Actor{UserID: userID, Label: email}, "user.signed_in", email, map[string]any{"method": method})
}

// TenantIDByInstallation routes a webhook to its tenant (purpose
// webhook.route); "" when no tenant is bound to the installation.
func (db *DB) TenantIDByInstallation(ctx context.Context, installationID int64) (_ string, err error) {
	defer wrap(&err, "postgres.TenantIDByInstallation")
	var id *string
	if err := db.Pool.QueryRow(ctx, "SELECT tenant_id_by_installation($1)::text", installationID).Scan(&id); err != nil {
		return "", err
	}
	if id == nil {
		return "", nil
	}
	return *id, nil
}

// RecordDelivery records a webhook delivery; false when it was seen before:
// the same delivery id (a redelivery), or the same body under another id (a
// replay, recognised by the body's SHA-256).
func (tx *Tx) RecordDelivery(ctx context.Context, deliveryID, event string, bodySHA256 []byte) (_ bool, err error) {
	defer wrap(&err, "postgres.RecordDelivery")
	tenantID := tx.tenantID
	tag, err := tx.q.Exec(ctx, `INSERT INTO github_deliveries (tenant_id, delivery_id, event, body_sha256) VALUES ($1, $2, $3, $4)
		ON CONFLICT DO NOTHING`, tenantID, deliveryID, event, bodySHA256)
	return tag.RowsAffected() == 1, err
}

// RepositoryIDByGitHubID maps a GitHub repository id to the tenant's id.
func (tx *Tx) RepositoryIDByGitHubID(ctx context.Context, githubID int64) (_ int64, _ bool, err error) {
	defer wrap(&err, "postgres.RepositoryIDByGitHubID")
	tenantID := tx.tenantID
	var id int64
	err = tx.q.QueryRow(ctx, `SELECT id FROM repositories WHERE tenant_id = $1 AND github_id = $2`, tenantID, githubID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return id, err == nil, err
}

// TenantsWithInstallation lists the tenants bound to a GitHub installation
// (purpose worker.schedule).
func (db *DB) TenantsWithInstallation(ctx context.Context) (_ []string, err error) {
	defer wrap(&err, "postgres.TenantsWithInstallation")
	rows, err := db.Pool.Query(ctx, "SELECT id::text FROM tenants_with_installation() AS id")
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
