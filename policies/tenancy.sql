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
