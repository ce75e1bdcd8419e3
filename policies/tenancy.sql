-- Row-level security for every tenant table, and the runtime role's
-- privileges. Applied (idempotently) by `cltctl migrate` after the
-- migrations, as the owner role {{owner}}, inside the same transaction.
--
-- The policy reads the tenant from the transaction-local setting
-- app.tenant_id. current_setting() without missing_ok raises an error when
-- the setting was never made, and ''::uuid raises one after a transaction
-- that set it has ended, so a query without a tenant fails instead of
-- returning rows. The sub-select makes PostgreSQL evaluate the setting once
-- per statement rather than once per row.

DO $$
DECLARE
    t record;
BEGIN
    FOR t IN
        SELECT c.relname
        FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped
        WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t.relname);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t.relname);
        EXECUTE format('DROP POLICY IF EXISTS tenant_isolation ON %I', t.relname);
        EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
            USING (tenant_id = (SELECT current_setting('app.tenant_id')::uuid))
            WITH CHECK (tenant_id = (SELECT current_setting('app.tenant_id')::uuid))$p$, t.relname);
    END LOOP;
END
$$;

-- tenants is the root: its own id is the tenant.
ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenants FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS tenant_isolation ON tenants;
CREATE POLICY tenant_isolation ON tenants
    USING (id = (SELECT current_setting('app.tenant_id')::uuid))
    WITH CHECK (id = (SELECT current_setting('app.tenant_id')::uuid));

-- The runtime role reads and writes tenant data, always under the policies
-- above. It may append to the audit log but never change or delete it.
GRANT USAGE ON SCHEMA public TO {{app}};
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {{app}};
REVOKE UPDATE, DELETE ON audit_events FROM {{app}};
REVOKE ALL ON schema_migrations FROM {{app}};
-- /readyz compares the applied migrations with the embedded ones.
GRANT SELECT ON schema_migrations TO {{app}};
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {{app}};

-- Authentication epochs (migration 0062): every statement that changes a
-- row auth_token (policies/auth.sql) reads sets the tenant's epoch to a new
-- value, in its own transaction, so that a token's cached facts are known
-- to stand exactly while the epoch they were read at does (pkg/authn's
-- authentication ahead). Only these triggers write epochs: the runtime role
-- reads its tenant's row and nothing more, and the function runs as the
-- owner, which may write any tenant's row. The row lock of the update
-- orders the epochs of one tenant as their transactions commit.
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON auth_epochs FROM {{app}};
REVOKE USAGE ON SEQUENCE auth_epoch_seq FROM {{app}};
DROP POLICY IF EXISTS auth_epoch_bump ON auth_epochs;
CREATE POLICY auth_epoch_bump ON auth_epochs TO {{owner}} USING (true) WITH CHECK (true);

-- auth_epoch_set gives each of the tenants a new epoch (the triggers'
-- one write; they run it as the owner).
CREATE OR REPLACE FUNCTION auth_epoch_set(p_tenants uuid[]) RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, public, pg_temp
AS $fn$
    INSERT INTO public.auth_epochs AS e (tenant_id, epoch)
    SELECT x.t, nextval('public.auth_epoch_seq')
    FROM (SELECT DISTINCT u.t FROM unnest(p_tenants) AS u(t) WHERE u.t IS NOT NULL) x
    ON CONFLICT (tenant_id) DO UPDATE SET epoch = excluded.epoch
$fn$;
REVOKE ALL ON FUNCTION auth_epoch_set(uuid[]) FROM PUBLIC;

-- auth_epoch_bump is the statement trigger of the tables whose rows carry
-- the tenant in tenant_id: the tenants of the rows the statement inserted,
-- changed or deleted (transition tables auth_new and auth_old) get a new
-- epoch. A statement that changed no row changes no epoch here.
CREATE OR REPLACE FUNCTION auth_epoch_bump() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $fn$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM public.auth_epoch_set(ARRAY(SELECT n.tenant_id FROM auth_new n));
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM public.auth_epoch_set(ARRAY(SELECT o.tenant_id FROM auth_old o));
    END IF;
    RETURN NULL;
END
$fn$;

-- auth_epoch_lock runs before each such statement of a tenant
-- transaction (app.tenant_id set, as for every write of the runtime role)
-- and gives that tenant a new epoch first: its row lock is then taken
-- before any row the statement changes. Taken after them instead, two
-- transactions of one tenant that change the same auth rows in another
-- order (a sign-in and a membership refresh) would deadlock, one holding
-- the rows, the other the epoch. Such a statement sets a new epoch even
-- when it changes no row; the after triggers cover writes of any tenant.
CREATE OR REPLACE FUNCTION auth_epoch_lock() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $fn$
BEGIN
    PERFORM public.auth_epoch_set(ARRAY[nullif(current_setting('app.tenant_id', true), '')::uuid]);
    RETURN NULL;
END
$fn$;

-- auth_epoch_bump_row is the row trigger of mcp_tokens (only the columns
-- auth_token decides on: recording a token's last use changes no epoch)
-- and of tenants (the slug; TG_ARGV[0] names the tenant column).
CREATE OR REPLACE FUNCTION auth_epoch_bump_row() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $fn$
BEGIN
    PERFORM public.auth_epoch_set(ARRAY[(to_jsonb(OLD) ->> TG_ARGV[0])::uuid, (to_jsonb(NEW) ->> TG_ARGV[0])::uuid]);
    RETURN NULL;
END
$fn$;

-- TRUNCATE fires no row or statement trigger of the three events, so it
-- would change facts without an epoch: it is refused on these tables (and
-- on auth_epochs, whose missing rows read as epoch 0). Delete instead.
CREATE OR REPLACE FUNCTION auth_epoch_no_truncate() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, public, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION '% cannot be truncated: authentication epochs (migration 0062) would miss the change; use DELETE', TG_TABLE_NAME;
END
$fn$;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['users', 'tenant_settings', 'identity_providers', 'tenant_memberships',
                             'repo_memberships', 'oidc_group_mappings'] LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS auth_epoch_insert ON %I', t);
        EXECUTE format('CREATE TRIGGER auth_epoch_insert AFTER INSERT ON %I REFERENCING NEW TABLE AS auth_new
            FOR EACH STATEMENT EXECUTE FUNCTION auth_epoch_bump()', t);
        EXECUTE format('DROP TRIGGER IF EXISTS auth_epoch_update ON %I', t);
        EXECUTE format('CREATE TRIGGER auth_epoch_update AFTER UPDATE ON %I REFERENCING OLD TABLE AS auth_old NEW TABLE AS auth_new
            FOR EACH STATEMENT EXECUTE FUNCTION auth_epoch_bump()', t);
        EXECUTE format('DROP TRIGGER IF EXISTS auth_epoch_lock ON %I', t);
        EXECUTE format('CREATE TRIGGER auth_epoch_lock BEFORE INSERT OR UPDATE OR DELETE ON %I
            FOR EACH STATEMENT EXECUTE FUNCTION auth_epoch_lock()', t);
        EXECUTE format('DROP TRIGGER IF EXISTS auth_epoch_delete ON %I', t);
        EXECUTE format('CREATE TRIGGER auth_epoch_delete AFTER DELETE ON %I REFERENCING OLD TABLE AS auth_old
            FOR EACH STATEMENT EXECUTE FUNCTION auth_epoch_bump()', t);
    END LOOP;
    FOREACH t IN ARRAY ARRAY['users', 'tenant_settings', 'identity_providers', 'tenant_memberships',
                             'repo_memberships', 'oidc_group_mappings', 'mcp_tokens', 'tenants', 'auth_epochs'] LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS auth_epoch_no_truncate ON %I', t);
        EXECUTE format('CREATE TRIGGER auth_epoch_no_truncate BEFORE TRUNCATE ON %I
            FOR EACH STATEMENT EXECUTE FUNCTION auth_epoch_no_truncate()', t);
    END LOOP;
END
$$;
-- A token's row: every column auth_token reads but last_used_at. (A new
-- token has no cached facts; its insert changes no epoch.)
DROP TRIGGER IF EXISTS auth_epoch_row ON mcp_tokens;
CREATE TRIGGER auth_epoch_row AFTER DELETE OR UPDATE OF tenant_id, id, user_id, token_hash, expires_at, revoked_at,
    idp_id, idp_groups, oauth_grant_id, audience ON mcp_tokens
    FOR EACH ROW EXECUTE FUNCTION auth_epoch_bump_row('tenant_id');
DROP TRIGGER IF EXISTS auth_epoch_lock ON mcp_tokens;
CREATE TRIGGER auth_epoch_lock BEFORE DELETE OR UPDATE OF tenant_id, id, user_id, token_hash, expires_at, revoked_at,
    idp_id, idp_groups, oauth_grant_id, audience ON mcp_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION auth_epoch_lock();
DROP TRIGGER IF EXISTS auth_epoch_row ON tenants;
CREATE TRIGGER auth_epoch_row AFTER DELETE OR UPDATE OF id, slug ON tenants
    FOR EACH ROW EXECUTE FUNCTION auth_epoch_bump_row('id');
DROP TRIGGER IF EXISTS auth_epoch_lock ON tenants;
CREATE TRIGGER auth_epoch_lock BEFORE DELETE OR UPDATE OF id, slug ON tenants
    FOR EACH STATEMENT EXECUTE FUNCTION auth_epoch_lock();
