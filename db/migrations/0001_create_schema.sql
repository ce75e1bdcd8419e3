-- The whole schema of CodeLotse MCP. Every table that holds tenant data has a
-- tenant_id column, starts its indexes with tenant_id, includes tenant_id in
-- its foreign keys, and gets FORCE ROW LEVEL SECURITY with the tenant policy
-- (see policies/tenancy.sql, applied after every migration run).
--
-- This file runs as the owner role ({{owner}}), so the owner owns every table
-- and the runtime role ({{app}}) owns nothing.

CREATE TABLE tenants (
    id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    slug                   text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    name                   text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    -- A tenant maps to a GitHub App installation by ids, never by login.
    github_installation_id bigint UNIQUE,
    github_account_id      bigint,
    created_at             timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tenant_settings (
    tenant_id  uuid PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    -- settings.mcp.enabled switches the MCP endpoint for the tenant (off by default).
    settings   jsonb NOT NULL DEFAULT '{"mcp": {"enabled": false}}',
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE identity_providers (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            uuid NOT NULL DEFAULT gen_random_uuid(),
    issuer        text NOT NULL,
    client_id     text NOT NULL,
    client_secret text NOT NULL,
    groups_claim  text NOT NULL DEFAULT 'groups',
    scopes        text[] NOT NULL DEFAULT ARRAY['openid', 'email', 'profile', 'groups'],
    enabled       boolean NOT NULL DEFAULT true,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    UNIQUE (id),
    UNIQUE (tenant_id, issuer)
);

CREATE TABLE users (
    tenant_id      uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id             uuid NOT NULL DEFAULT gen_random_uuid(),
    email          text NOT NULL CHECK (email ~ '^[^@\s]+@[^@\s]+$'),
    name           text NOT NULL DEFAULT '',
    github_user_id bigint,
    github_login   text,
    idp_id         uuid,
    idp_subject    text,
    -- A deleted user keeps its row for the audit log; its tokens stop working.
    deleted_at     timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    UNIQUE (id),
    FOREIGN KEY (tenant_id, idp_id) REFERENCES identity_providers (tenant_id, id)
);
CREATE UNIQUE INDEX users_tenant_email ON users (tenant_id, lower(email));
CREATE UNIQUE INDEX users_tenant_github ON users (tenant_id, github_user_id) WHERE github_user_id IS NOT NULL;
CREATE UNIQUE INDEX users_tenant_idp_subject ON users (tenant_id, idp_id, idp_subject) WHERE idp_id IS NOT NULL;

CREATE TABLE repositories (
    tenant_id      uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id             bigint GENERATED ALWAYS AS IDENTITY,
    github_id      bigint,
    full_name      text NOT NULL CHECK (full_name ~ '^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$'),
    default_branch text NOT NULL DEFAULT 'main',
    private        boolean NOT NULL DEFAULT false,
    url            text NOT NULL DEFAULT '',
    indexed_commit text,
    indexed_at     timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    UNIQUE (id)
);
CREATE UNIQUE INDEX repositories_tenant_full_name ON repositories (tenant_id, lower(full_name));
CREATE UNIQUE INDEX repositories_tenant_github ON repositories (tenant_id, github_id) WHERE github_id IS NOT NULL;

CREATE TABLE tenant_memberships (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    user_id      uuid NOT NULL,
    role         text NOT NULL CHECK (role IN ('admin', 'member')),
    -- source says where the cache came from: github (sign-in), local (cltctl).
    source       text NOT NULL DEFAULT 'github' CHECK (source IN ('github', 'local')),
    refreshed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, id) ON DELETE CASCADE
);

CREATE TABLE repo_memberships (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    user_id       uuid NOT NULL,
    repository_id bigint NOT NULL,
    permission    text NOT NULL DEFAULT 'read',
    refreshed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id, repository_id),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, repository_id) REFERENCES repositories (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX repo_memberships_tenant_repo ON repo_memberships (tenant_id, repository_id);

CREATE TABLE oidc_group_mappings (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            bigint GENERATED ALWAYS AS IDENTITY,
    idp_id        uuid NOT NULL,
    group_name    text NOT NULL CHECK (length(group_name) BETWEEN 1 AND 300),
    role          text NOT NULL CHECK (role IN ('admin', 'member')),
    -- NULL: the mapping grants the role only; a repository: also that repository.
    repository_id bigint,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, idp_id) REFERENCES identity_providers (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, repository_id) REFERENCES repositories (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX oidc_group_mappings_unique ON oidc_group_mappings (tenant_id, idp_id, group_name, role, coalesce(repository_id, 0));

CREATE TABLE pull_requests (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            bigint GENERATED ALWAYS AS IDENTITY,
    repository_id bigint NOT NULL,
    number        integer NOT NULL CHECK (number > 0),
    title         text NOT NULL DEFAULT '',
    author        text NOT NULL DEFAULT '',
    state         text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed', 'merged')),
    base_ref      text NOT NULL DEFAULT '',
    head_ref      text NOT NULL DEFAULT '',
    head_sha      text NOT NULL DEFAULT '',
    url           text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, repository_id, number),
    FOREIGN KEY (tenant_id, repository_id) REFERENCES repositories (tenant_id, id) ON DELETE CASCADE
);

CREATE TABLE reviews (
    tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id              bigint GENERATED ALWAYS AS IDENTITY,
    repository_id   bigint NOT NULL,
    pull_request_id bigint,
    -- external_id identifies the review at its source (import or GitHub) so
    -- that re-importing or re-syncing it is idempotent.
    external_id     text NOT NULL,
    commit_sha      text NOT NULL DEFAULT '',
    status          text NOT NULL DEFAULT 'completed',
    summary         text NOT NULL DEFAULT '',
    author          text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, repository_id, external_id),
    FOREIGN KEY (tenant_id, repository_id) REFERENCES repositories (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, pull_request_id) REFERENCES pull_requests (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX reviews_tenant_pr ON reviews (tenant_id, pull_request_id, created_at DESC);

CREATE TABLE findings (
    tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id              bigint GENERATED ALWAYS AS IDENTITY,
    repository_id   bigint NOT NULL,
    pull_request_id bigint,
    review_id       bigint,
    rule_key        text NOT NULL DEFAULT '',
    severity        text NOT NULL CHECK (severity IN ('info', 'low', 'medium', 'high', 'critical')),
    status          text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved', 'dismissed')),
    path            text NOT NULL DEFAULT '',
    start_line      integer,
    end_line        integer,
    title           text NOT NULL DEFAULT '',
    body            text NOT NULL DEFAULT '',
    suggestion      text NOT NULL DEFAULT '',
    fingerprint     text NOT NULL,
    commit_sha      text NOT NULL DEFAULT '',
    source          text NOT NULL DEFAULT 'import',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, repository_id) REFERENCES repositories (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, pull_request_id) REFERENCES pull_requests (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, review_id) REFERENCES reviews (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX findings_tenant_review_fingerprint ON findings (tenant_id, review_id, fingerprint);
CREATE INDEX findings_tenant_repo_created ON findings (tenant_id, repository_id, created_at DESC, id DESC);
CREATE INDEX findings_tenant_created ON findings (tenant_id, created_at DESC, id DESC);

CREATE TABLE rules (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            bigint GENERATED ALWAYS AS IDENTITY,
    -- NULL: a tenant-wide rule; otherwise the rule of one repository.
    repository_id bigint,
    key           text NOT NULL CHECK (key ~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,99}$'),
    title         text NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    severity      text NOT NULL CHECK (severity IN ('info', 'low', 'medium', 'high', 'critical')),
    path_globs    text[] NOT NULL DEFAULT '{}',
    instructions  text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, repository_id) REFERENCES repositories (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX rules_tenant_repo_key ON rules (tenant_id, coalesce(repository_id, 0), key);

CREATE TABLE code_files (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            bigint GENERATED ALWAYS AS IDENTITY,
    repository_id bigint NOT NULL,
    commit_sha    text NOT NULL,
    path          text NOT NULL,
    language      text NOT NULL DEFAULT '',
    size          bigint NOT NULL,
    blob_sha      text NOT NULL DEFAULT '',
    line_count    integer NOT NULL DEFAULT 0,
    -- skip_reason is set for files that are listed but not indexed
    -- (binary, larger than 1 MiB).
    skip_reason   text,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, repository_id) REFERENCES repositories (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX code_files_tenant_repo_path ON code_files (tenant_id, repository_id, commit_sha, path);

CREATE TABLE code_chunks (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            bigint GENERATED ALWAYS AS IDENTITY,
    repository_id bigint NOT NULL,
    file_id       bigint NOT NULL,
    start_line    integer NOT NULL,
    end_line      integer NOT NULL,
    content       text NOT NULL,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, repository_id) REFERENCES repositories (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, file_id) REFERENCES code_files (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX code_chunks_tenant_file ON code_chunks (tenant_id, file_id, start_line);
-- Trigram index for code search; btree_gin lets tenant_id lead it.
CREATE INDEX code_chunks_tenant_content_trgm ON code_chunks USING gin (tenant_id, content gin_trgm_ops);

CREATE TABLE mcp_tokens (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           uuid NOT NULL DEFAULT gen_random_uuid(),
    user_id      uuid NOT NULL,
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    -- SHA-256 of the whole token; the secret itself is never stored.
    token_hash   bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    last4        text NOT NULL CHECK (length(last4) = 4),
    scope        text NOT NULL DEFAULT 'mcp:read' CHECK (scope = 'mcp:read'),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz,
    last_used_at timestamptz,
    -- For tokens created in an OIDC session: the provider and the IdP groups
    -- snapshot that grants are computed from on every request.
    idp_id       uuid,
    idp_groups   text[],
    CHECK (expires_at > created_at AND expires_at <= created_at + interval '90 days 1 minute'),
    PRIMARY KEY (tenant_id, id),
    UNIQUE (id),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, idp_id) REFERENCES identity_providers (tenant_id, id)
);
CREATE INDEX mcp_tokens_tenant_user ON mcp_tokens (tenant_id, user_id, created_at DESC);

CREATE TABLE web_sessions (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           uuid NOT NULL DEFAULT gen_random_uuid(),
    -- SHA-256 of the cookie value; the cookie value itself is never stored.
    session_hash bytea NOT NULL UNIQUE CHECK (length(session_hash) = 32),
    user_id      uuid NOT NULL,
    break_glass  boolean NOT NULL DEFAULT false,
    idp_id       uuid,
    idp_groups   text[],
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX web_sessions_tenant_user ON web_sessions (tenant_id, user_id);

CREATE TABLE audit_events (
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id         bigint GENERATED ALWAYS AS IDENTITY,
    -- actor is a user id or a label such as "cltctl" for operator commands.
    actor_user_id uuid,
    actor      text NOT NULL,
    action     text NOT NULL,
    target     text NOT NULL DEFAULT '',
    details    jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX audit_events_tenant_created ON audit_events (tenant_id, created_at DESC, id DESC);
