-- The GitHub updated_at of each pull request as of its last complete sync,
-- so the hourly sync can skip closed pull requests that have not changed
-- since (their reviews, comments and threads are not read again).
CREATE TABLE github_pull_syncs (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    repository_id bigint NOT NULL,
    number        integer NOT NULL CHECK (number > 0),
    updated_at    timestamptz NOT NULL,
    synced_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, repository_id, number),
    FOREIGN KEY (tenant_id, repository_id) REFERENCES repositories (tenant_id, id) ON DELETE CASCADE
);
