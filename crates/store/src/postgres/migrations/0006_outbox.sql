-- Schema version 6: the webhook outbox. Each row is an event waiting for its delivery to one
-- webhook. The rows of one webhook and key go out one at a time, in id order: only the oldest
-- of each key is marked `head`, and only heads are taken (`FOR UPDATE SKIP LOCKED`, leased
-- until `leased_until`, so instances share the work and never take one row together; an
-- instance that dies mid-delivery leaves its row to be taken again when the lease ends). The
-- writes that add or remove a key's rows hold a transaction advisory lock on that key, so that
-- `head` always marks exactly its oldest row.
CREATE SEQUENCE outbox_ids;
CREATE TABLE outbox (
    id           BIGINT  PRIMARY KEY,
    webhook      TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    event        TEXT    NOT NULL,
    -- The JSON as it is signed and sent.
    body         BYTEA   NOT NULL,
    created_at   BIGINT  NOT NULL,
    attempts     INT     NOT NULL DEFAULT 0,
    next_at      BIGINT  NOT NULL,
    last_error   TEXT,
    leased_until BIGINT  NOT NULL DEFAULT 0,
    head         BOOLEAN NOT NULL DEFAULT false
);
CREATE INDEX outbox_by_key ON outbox (webhook, key, id);
-- The heads by when they are due: a take reads these and nothing else, however many rows wait
-- behind a head that is retrying.
CREATE INDEX outbox_due ON outbox (next_at, id) WHERE head;

-- The delivery log: one row per attempt, the last 1,000 of each webhook (older ones are deleted
-- as new ones are written), newest first by `seq`.
CREATE SEQUENCE outbox_log_ids;
CREATE TABLE outbox_log (
    seq      BIGINT   PRIMARY KEY,
    id       BIGINT   NOT NULL,
    webhook  TEXT     NOT NULL,
    event    TEXT     NOT NULL,
    key      TEXT     NOT NULL,
    at       BIGINT   NOT NULL,
    attempts INT      NOT NULL,
    -- 1 delivered, 2 failed, 3 gave up.
    outcome  SMALLINT NOT NULL,
    status   INT,
    error    TEXT
);
CREATE INDEX outbox_log_by_webhook ON outbox_log (webhook, seq);
