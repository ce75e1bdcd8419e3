-- A tenant's authentication epoch (issue 11: a cheaper check of a cached
-- token). Every transaction that changes a row auth_token reads — a token
-- (but not its last use), a user, the tenant's settings or slug, an
-- identity provider, a membership, a repository membership, a group
-- mapping — sets its tenant's epoch to a new value of auth_epoch_seq as it
-- commits (the deferred triggers of policies/tenancy.sql). auth_token
-- returns the epoch with the facts, from the same snapshot; a request let
-- through on cached facts then reads only the epoch with its first read,
-- and the facts stand while it is unchanged. A change gives a new epoch,
-- the cached facts are dropped and the token is looked up in full, so the
-- very next request is refused or narrowed as before.
--
-- The values come from one sequence and are never reused, so an epoch
-- never returns to a value facts were cached at. A tenant without a row
-- is at epoch 0 (nothing changed since this migration, or a new tenant);
-- its first change inserts a row. Rows are never deleted — no foreign key
-- cascades them away with their tenant, only the triggers' owner writes
-- them, and DELETE and TRUNCATE are refused — because a deleted row would
-- read as 0 again.
CREATE SEQUENCE auth_epoch_seq;
CREATE TABLE auth_epochs (
    tenant_id uuid PRIMARY KEY,
    epoch     bigint NOT NULL CHECK (epoch > 0),
    -- The transaction that set it (a 64-bit id, never reused: the row's
    -- xmin wraps around), so that its later changed rows need not set it
    -- again.
    xact      xid8 NOT NULL
);
