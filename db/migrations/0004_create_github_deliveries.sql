-- Webhook deliveries already handled, by X-GitHub-Delivery, so that a
-- redelivery enqueues nothing twice.
CREATE TABLE github_deliveries (
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    delivery_id text NOT NULL CHECK (length(delivery_id) BETWEEN 1 AND 100),
    event       text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, delivery_id)
);
CREATE INDEX github_deliveries_tenant_received ON github_deliveries (tenant_id, received_at);
