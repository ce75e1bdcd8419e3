-- System purposes that must read across tenants before a tenant is known.
-- Each is a SECURITY DEFINER function owned by a narrow NOLOGIN role that
-- can read only the columns the purpose needs, with search_path pinned.
-- The runtime role may execute them; nobody else may.
--
-- Applied by `cltctl migrate` as the administrative role after the owner's
-- part, because the functions are owned by {{auth}}, not by the owner.

-- Purpose auth.session (ADR-0006/ADR-0018): bearer token authentication.
-- {{auth}} sees every row of these four tables, but only these columns,
-- and only through the function below (it cannot log in).
GRANT USAGE ON SCHEMA public TO {{auth}};
GRANT SELECT (tenant_id, id, user_id, token_hash, expires_at, revoked_at, last_used_at, idp_id, idp_groups,
    oauth_grant_id, audience)
    ON mcp_tokens TO {{auth}};
GRANT SELECT (tenant_id, id, deleted_at) ON users TO {{auth}};
GRANT SELECT (tenant_id, settings) ON tenant_settings TO {{auth}};
GRANT SELECT (tenant_id, id, enabled) ON identity_providers TO {{auth}};

DROP POLICY IF EXISTS auth_session_read ON mcp_tokens;
CREATE POLICY auth_session_read ON mcp_tokens FOR SELECT TO {{auth}} USING (true);
DROP POLICY IF EXISTS auth_session_read ON users;
CREATE POLICY auth_session_read ON users FOR SELECT TO {{auth}} USING (true);
DROP POLICY IF EXISTS auth_session_read ON tenant_settings;
CREATE POLICY auth_session_read ON tenant_settings FOR SELECT TO {{auth}} USING (true);
DROP POLICY IF EXISTS auth_session_read ON identity_providers;
CREATE POLICY auth_session_read ON identity_providers FOR SELECT TO {{auth}} USING (true);

-- The token's grants come from the same call (one round trip per request):
-- the cached GitHub membership of the token's user in the token's tenant,
-- their repository memberships, and, for OIDC tokens, the tenant's current
-- mappings of the groups in the token's snapshot. Nothing about any other
-- user or tenant is read.
GRANT SELECT (tenant_id, user_id, role, source, refreshed_at) ON tenant_memberships TO {{auth}};
GRANT SELECT (tenant_id, user_id, repository_id) ON repo_memberships TO {{auth}};
GRANT SELECT (tenant_id, id, idp_id, group_name, role, repository_id) ON oidc_group_mappings TO {{auth}};
DROP POLICY IF EXISTS auth_session_read ON tenant_memberships;
CREATE POLICY auth_session_read ON tenant_memberships FOR SELECT TO {{auth}} USING (true);
DROP POLICY IF EXISTS auth_session_read ON repo_memberships;
CREATE POLICY auth_session_read ON repo_memberships FOR SELECT TO {{auth}} USING (true);
DROP POLICY IF EXISTS auth_session_read ON oidc_group_mappings;
CREATE POLICY auth_session_read ON oidc_group_mappings FOR SELECT TO {{auth}} USING (true);
-- And the tenant's authentication epoch (migration 0062), read in the same
-- snapshot as the facts: a request on cached facts later reads only the
-- epoch, and the facts stand while it is unchanged.
GRANT SELECT (tenant_id, epoch) ON auth_epochs TO {{auth}};
DROP POLICY IF EXISTS auth_session_read ON auth_epochs;
CREATE POLICY auth_session_read ON auth_epochs FOR SELECT TO {{auth}} USING (true);

-- auth_token returns the facts the bearer authenticator decides on, for the
-- token whose SHA-256 is p_hash, or no row. It does not decide itself so
-- that the service can log why a token was refused (never the token), and
-- so that grants stay a pure Go function (pkg/grants) -- with one exception:
-- an access token issued to an OAuth client (oauth_grant_id set) is bound to
-- the resource it was issued for and to the tenant's OAuth switch, and the
-- function itself refuses it (no row) when p_resource, the endpoint that was
-- called, is another one, or when the tenant has switched OAuth clients off
-- (tenant_settings.settings.oauth.enabled, on unless set to false). So no
-- caller can accept a token of one tenant's resource at another's.
DROP FUNCTION IF EXISTS auth_token(bytea);
DROP FUNCTION IF EXISTS auth_token(bytea, text);
CREATE FUNCTION auth_token(p_hash bytea, p_resource text)
RETURNS TABLE (
    token_id        uuid,
    tenant_id       uuid,
    user_id         uuid,
    expires_at      timestamptz,
    revoked_at      timestamptz,
    last_used_at    timestamptz,
    user_active     boolean,
    mcp_enabled     boolean,
    idp_id          uuid,
    idp_enabled     boolean,
    idp_groups      text[],
    member_role     text,
    member_source   text,
    member_since    timestamptz,
    repo_ids        bigint[],
    map_groups      text[],
    map_roles       text[],
    map_repo_ids    bigint[],
    oauth_grant_id  uuid,
    -- The token's tenant's slug, so that a tenant endpoint
    -- (/t/{slug}/mcp) can confirm with these facts that the slug it
    -- resolved from memory still names that tenant (issue 11).
    tenant_slug     text,
    -- The tenant's authentication epoch (0: no change since migration
    -- 0062 or since the tenant was made).
    auth_epoch      bigint
)
-- plpgsql, not sql: a LANGUAGE sql SECURITY DEFINER function is never
-- inlined and is planned again on every call, while plpgsql keeps the plan
-- of its statement for the connection. This is the one query of every MCP
-- request (issue 11).
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT t.id, t.tenant_id, t.user_id, t.expires_at, t.revoked_at, t.last_used_at,
           (u.id IS NOT NULL AND u.deleted_at IS NULL),
           coalesce((s.settings #>> '{mcp,enabled}')::boolean, false),
           t.idp_id,
           CASE WHEN t.idp_id IS NULL THEN NULL ELSE coalesce(i.enabled, false) END,
           t.idp_groups,
           m.role, m.source, m.refreshed_at,
           coalesce((SELECT array_agg(rm.repository_id) FROM public.repo_memberships rm
                     WHERE rm.tenant_id = t.tenant_id AND rm.user_id = t.user_id), '{}'),
           g.groups, g.roles, g.repos,
           t.oauth_grant_id,
           tn.slug,
           coalesce((SELECT e.epoch FROM public.auth_epochs e WHERE e.tenant_id = t.tenant_id), 0)
    FROM public.mcp_tokens t
    LEFT JOIN public.tenants tn ON tn.id = t.tenant_id
    LEFT JOIN public.users u ON u.tenant_id = t.tenant_id AND u.id = t.user_id
    LEFT JOIN public.tenant_settings s ON s.tenant_id = t.tenant_id
    LEFT JOIN public.identity_providers i ON i.tenant_id = t.tenant_id AND i.id = t.idp_id
    LEFT JOIN public.tenant_memberships m ON m.tenant_id = t.tenant_id AND m.user_id = t.user_id
    LEFT JOIN LATERAL (
        SELECT array_agg(gm.group_name ORDER BY gm.id) AS groups,
               array_agg(gm.role ORDER BY gm.id) AS roles,
               array_agg(coalesce(gm.repository_id, 0) ORDER BY gm.id) AS repos
        FROM public.oidc_group_mappings gm
        WHERE t.idp_id IS NOT NULL AND gm.tenant_id = t.tenant_id AND gm.idp_id = t.idp_id
          AND gm.group_name = ANY(t.idp_groups)
    ) g ON true
    WHERE t.token_hash = p_hash
      AND (t.oauth_grant_id IS NULL
           OR (t.audience = p_resource
               AND coalesce((s.settings #>> '{oauth,enabled}')::boolean, true)));
END
$$;
ALTER FUNCTION auth_token(bytea, text) OWNER TO {{auth}};
REVOKE ALL ON FUNCTION auth_token(bytea, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION auth_token(bytea, text) TO {{app}};

-- Purpose auth.signin (operators and web sign-in): resolve a tenant slug to
-- its id before any tenant is known. Reads only id and slug of tenants.
GRANT SELECT (id, slug) ON tenants TO {{auth}};
DROP POLICY IF EXISTS auth_signin_read ON tenants;
CREATE POLICY auth_signin_read ON tenants FOR SELECT TO {{auth}} USING (true);

CREATE OR REPLACE FUNCTION tenant_id_by_slug(p_slug text)
RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT id FROM public.tenants WHERE slug = p_slug
$$;
ALTER FUNCTION tenant_id_by_slug(text) OWNER TO {{auth}};
REVOKE ALL ON FUNCTION tenant_id_by_slug(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tenant_id_by_slug(text) TO {{app}};

-- Purpose webhook.route: find the tenant of a GitHub App installation when
-- a webhook arrives. Reads only id and github_installation_id of tenants.
GRANT SELECT (id, github_installation_id) ON tenants TO {{auth}};
CREATE OR REPLACE FUNCTION tenant_id_by_installation(p_installation bigint)
RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT id FROM public.tenants WHERE github_installation_id = p_installation
$$;
ALTER FUNCTION tenant_id_by_installation(bigint) OWNER TO {{auth}};
REVOKE ALL ON FUNCTION tenant_id_by_installation(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tenant_id_by_installation(bigint) TO {{app}};

-- Purpose worker.schedule: the periodic sync enqueues one installation sync
-- per tenant bound to an installation. Returns only tenant ids.
CREATE OR REPLACE FUNCTION tenants_with_installation()
RETURNS SETOF uuid
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT id FROM public.tenants WHERE github_installation_id IS NOT NULL ORDER BY id
$$;
ALTER FUNCTION tenants_with_installation() OWNER TO {{auth}};
REVOKE ALL ON FUNCTION tenants_with_installation() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tenants_with_installation() TO {{app}};

-- Purpose worker.secret_rescan: the periodic job enqueues one rescan per
-- tenant that learned a secret since its stored text was last rescanned
-- (migration 0072). Returns only tenant ids, oldest request first.
GRANT SELECT (tenant_id, requested_at) ON secret_rescans TO {{auth}};
DROP POLICY IF EXISTS worker_secret_rescan_read ON secret_rescans;
CREATE POLICY worker_secret_rescan_read ON secret_rescans FOR SELECT TO {{auth}} USING (true);
CREATE OR REPLACE FUNCTION tenants_with_secret_rescans()
RETURNS SETOF uuid
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT tenant_id FROM public.secret_rescans ORDER BY requested_at, tenant_id
$$;
ALTER FUNCTION tenants_with_secret_rescans() OWNER TO {{auth}};
REVOKE ALL ON FUNCTION tenants_with_secret_rescans() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tenants_with_secret_rescans() TO {{app}};

-- Purpose auth.maintenance: the API deletes sign-in states that expired, in
-- every tenant, on a schedule (unauthenticated GET /t/{slug}/login creates
-- them). {{auth}} may delete only rows that have expired: the policy, not
-- just the function, keeps live states out of reach.
GRANT SELECT (tenant_id, expires_at) ON login_states TO {{auth}};
GRANT DELETE ON login_states TO {{auth}};
DROP POLICY IF EXISTS auth_maintenance_read ON login_states;
CREATE POLICY auth_maintenance_read ON login_states FOR SELECT TO {{auth}} USING (expires_at < now());
DROP POLICY IF EXISTS auth_maintenance_delete ON login_states;
CREATE POLICY auth_maintenance_delete ON login_states FOR DELETE TO {{auth}} USING (expires_at < now());

-- The nil tenant makes the tenant_isolation policy (OR'ed with these) a
-- plain false instead of an error for a transaction without a tenant.
CREATE OR REPLACE FUNCTION purge_expired_login_states()
RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET app.tenant_id = '00000000-0000-0000-0000-000000000000'
AS $$
    WITH gone AS (DELETE FROM public.login_states WHERE expires_at < now() RETURNING 1)
    SELECT count(*) FROM gone
$$;
ALTER FUNCTION purge_expired_login_states() OWNER TO {{auth}};
REVOKE ALL ON FUNCTION purge_expired_login_states() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION purge_expired_login_states() TO {{app}};

-- Purpose operator.list (issue 14): `cltctl tenant list` shows every
-- tenant. Returns only tenant ids; the CLI reads each tenant's details in
-- that tenant's own transaction. Administrative only: not granted to the
-- runtime role.
GRANT SELECT (id, created_at) ON tenants TO {{auth}};
CREATE OR REPLACE FUNCTION tenant_ids_for_operator()
RETURNS SETOF uuid
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT id FROM public.tenants ORDER BY created_at, id
$$;
ALTER FUNCTION tenant_ids_for_operator() OWNER TO {{auth}};
REVOKE ALL ON FUNCTION tenant_ids_for_operator() FROM PUBLIC;
