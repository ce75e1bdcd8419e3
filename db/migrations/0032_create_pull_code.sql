-- The code index at pull requests' heads, stored against the base index
-- (the repository's indexed commit): for each open pull request only the
-- files it changes (with their chunks) and the paths it deletes. Every
-- other path reads through to the base index, so 100 open pull requests
-- cost the files they change, not 100 copies of the repository.
CREATE TABLE pull_code_heads (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    repository_id bigint NOT NULL,
    number        integer NOT NULL CHECK (number > 0),
    head_sha      text NOT NULL,
    -- base_sha is the base index's commit the changed files were read
    -- against; the overlay is rebuilt when either moves.
    base_sha      text NOT NULL,
    files         integer NOT NULL DEFAULT 0,
    indexed_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, repository_id, number),
    FOREIGN KEY (tenant_id, repository_id) REFERENCES repositories (tenant_id, id) ON DELETE CASCADE
);

CREATE TABLE pull_code_files (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            bigint GENERATED ALWAYS AS IDENTITY,
    repository_id bigint NOT NULL,
    number        integer NOT NULL,
    path          text NOT NULL,
    -- deleted: the pull request removes (or renames away) this path.
    deleted       boolean NOT NULL DEFAULT false,
    language      text NOT NULL DEFAULT '',
    size          bigint NOT NULL DEFAULT 0,
    line_count    integer NOT NULL DEFAULT 0,
    skip_reason   text,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, repository_id, number, path),
    FOREIGN KEY (tenant_id, repository_id, number) REFERENCES pull_code_heads (tenant_id, repository_id, number) ON DELETE CASCADE
);

CREATE TABLE pull_code_chunks (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            bigint GENERATED ALWAYS AS IDENTITY,
    repository_id bigint NOT NULL,
    number        integer NOT NULL,
    file_id       bigint NOT NULL,
    start_line    integer NOT NULL,
    end_line      integer NOT NULL,
    content       text NOT NULL,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, file_id) REFERENCES pull_code_files (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX pull_code_chunks_tenant_file ON pull_code_chunks (tenant_id, file_id, start_line);
CREATE INDEX pull_code_chunks_tenant_content_trgm ON pull_code_chunks USING gin (tenant_id, content gin_trgm_ops);
