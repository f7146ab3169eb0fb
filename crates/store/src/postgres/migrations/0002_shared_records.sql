-- Schema version 2: short-lived records every instance must see (page sessions, the CSV
-- results of "many at once"), so that a browser behind a load balancer may reach any instance.
CREATE TABLE shared_records (
    kind       TEXT   NOT NULL,
    id         BYTEA  NOT NULL,
    value      BYTEA  NOT NULL,
    touched_at BIGINT NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX shared_records_age ON shared_records (kind, touched_at);
