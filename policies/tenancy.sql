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

-- Authentication epochs (migration 0062): every transaction that changes a
-- row auth_token (policies/auth.sql) reads sets the tenant's epoch to a new
-- value as it commits, so that a token's cached facts are known to stand
-- exactly while the epoch they were read at does (pkg/authn's
-- authentication ahead). Only these triggers write epochs: the runtime role
-- reads its tenant's row and nothing more, and the function runs as the
-- owner, which may write any tenant's row.
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON auth_epochs FROM {{app}};
REVOKE USAGE ON SEQUENCE auth_epoch_seq FROM {{app}};
DROP POLICY IF EXISTS auth_epoch_bump ON auth_epochs;
CREATE POLICY auth_epoch_bump ON auth_epochs TO {{owner}} USING (true) WITH CHECK (true);

-- auth_epoch_bump is a deferred constraint trigger, so it runs at COMMIT,
-- once per changed row (TG_ARGV[0] names the row's tenant column; a row
-- moved to another tenant changes both): the first row of a tenant in a
-- transaction sets the tenant's epoch, later ones see that this
-- transaction set it and stop. The update's row lock orders a tenant's
-- epochs as their transactions commit, and is held only from there to the
-- end of the commit: a transaction takes it after every other lock it
-- takes, so it cannot deadlock one that waits for a row it holds (an epoch
-- taken at the first changing statement deadlocked sign-ins against
-- revocations, OAuth refreshes and the membership refresh, which lock
-- other rows first).
CREATE OR REPLACE FUNCTION auth_epoch_bump() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $fn$
DECLARE
    v_tenant uuid;
BEGIN
    FOR v_tenant IN SELECT DISTINCT x.t FROM (VALUES ((to_jsonb(OLD) ->> TG_ARGV[0])::uuid),
                                                     ((to_jsonb(NEW) ->> TG_ARGV[0])::uuid)) AS x(t)
                    WHERE x.t IS NOT NULL LOOP
        IF NOT EXISTS (SELECT 1 FROM public.auth_epochs e
                       WHERE e.tenant_id = v_tenant AND e.xact = pg_current_xact_id()) THEN
            INSERT INTO public.auth_epochs AS e (tenant_id, epoch, xact)
            VALUES (v_tenant, nextval('public.auth_epoch_seq'), pg_current_xact_id())
            ON CONFLICT (tenant_id) DO UPDATE SET epoch = excluded.epoch, xact = excluded.xact;
        END IF;
    END LOOP;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION auth_epoch_bump() FROM PUBLIC;

-- TRUNCATE fires no row trigger, so it would change facts without an
-- epoch, and a deleted epoch row reads as 0 again: both are refused (on
-- these tables, and on auth_epochs for DELETE too). Delete rows instead.
CREATE OR REPLACE FUNCTION auth_epoch_refuse() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, public, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION '% of % is refused: authentication epochs (migration 0062) would miss the change', TG_OP, TG_TABLE_NAME;
END
$fn$;
REVOKE ALL ON FUNCTION auth_epoch_refuse() FROM PUBLIC;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['users', 'tenant_settings', 'identity_providers', 'tenant_memberships',
                             'repo_memberships', 'oidc_group_mappings'] LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS auth_epoch ON %I', t);
        EXECUTE format('CREATE CONSTRAINT TRIGGER auth_epoch AFTER INSERT OR UPDATE OR DELETE ON %I
            DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION auth_epoch_bump(%L)', t, 'tenant_id');
    END LOOP;
    FOREACH t IN ARRAY ARRAY['users', 'tenant_settings', 'identity_providers', 'tenant_memberships',
                             'repo_memberships', 'oidc_group_mappings', 'mcp_tokens', 'tenants', 'auth_epochs'] LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS auth_epoch_no_truncate ON %I', t);
        EXECUTE format('CREATE TRIGGER auth_epoch_no_truncate BEFORE TRUNCATE ON %I
            FOR EACH STATEMENT EXECUTE FUNCTION auth_epoch_refuse()', t);
    END LOOP;
END
$$;
DROP TRIGGER IF EXISTS auth_epoch_no_delete ON auth_epochs;
CREATE TRIGGER auth_epoch_no_delete BEFORE DELETE ON auth_epochs
    FOR EACH STATEMENT EXECUTE FUNCTION auth_epoch_refuse();
-- A token's row: every column auth_token reads but last_used_at (the
-- column grants of {{auth}} in policies/auth.sql; TestAuthEpochs compares
-- the two). A new token has no cached facts; its insert changes no epoch.
DROP TRIGGER IF EXISTS auth_epoch ON mcp_tokens;
CREATE CONSTRAINT TRIGGER auth_epoch AFTER DELETE OR UPDATE OF tenant_id, id, user_id, token_hash, expires_at, revoked_at,
    idp_id, idp_groups, oauth_grant_id, audience ON mcp_tokens
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION auth_epoch_bump('tenant_id');
-- The tenant's slug (and its deletion, which cascades to its tokens too).
DROP TRIGGER IF EXISTS auth_epoch ON tenants;
CREATE CONSTRAINT TRIGGER auth_epoch AFTER DELETE OR UPDATE OF id, slug ON tenants
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION auth_epoch_bump('id');
