-- The outcome of the worker's last membership refresh from a tenant's
-- GitHub App installation, shown on the admin page: when the caches were
-- last refreshed without a sign-in, or why they cannot be (the
-- installation lacks a permission), so an admin knows whether members
-- must sign in every 24 hours.
CREATE TABLE github_membership_refreshes (
    tenant_id      uuid PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    -- ok: the caches were refreshed; missing_permission: the installation
    -- may not read members or collaborators (sign-in refresh only).
    state          text NOT NULL CHECK (state IN ('ok', 'missing_permission')),
    detail         text NOT NULL DEFAULT '' CHECK (length(detail) <= 500),
    members        integer NOT NULL DEFAULT 0,
    repositories   integer NOT NULL DEFAULT 0,
    users_refreshed integer NOT NULL DEFAULT 0,
    users_expired  integer NOT NULL DEFAULT 0,
    finished_at    timestamptz NOT NULL DEFAULT now(),
    last_ok_at     timestamptz
);
