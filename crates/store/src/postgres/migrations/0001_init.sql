-- vshortlink on PostgreSQL, schema version 1. Times are milliseconds since the Unix epoch
-- (BIGINT), as everywhere in the store; statuses are 0 active, 1 expired, 2 deleted, 3 archived.

-- Every link, by id, forever.
CREATE TABLE links (
    id           BIGINT PRIMARY KEY,
    code         TEXT     NOT NULL,
    url          TEXT     NOT NULL,
    space        TEXT     NOT NULL,
    custom       BOOLEAN  NOT NULL,
    created_at   BIGINT   NOT NULL,
    expires_at   BIGINT,
    status       SMALLINT NOT NULL,
    title        TEXT,
    tags         TEXT[]   NOT NULL DEFAULT '{}',
    updated_at   BIGINT   NOT NULL,
    deleted_at   BIGINT,
    -- When an expired or deleted link started waiting for recycling; NULL once it is
    -- archived or retired (its code kept forever).
    recycle_from BIGINT
);
-- A code has at most one owner: whatever any other check says, no code is issued twice.
CREATE UNIQUE INDEX links_code_owner ON links (code) WHERE status <> 3;
-- Dedup targets: active generated links by space and URL.
CREATE INDEX links_dedup ON links (space, md5(url)) WHERE status = 0 AND NOT custom;
-- The lifecycle job's two queues.
CREATE INDEX links_expiry ON links (expires_at, id) WHERE status = 0 AND expires_at IS NOT NULL;
CREATE INDEX links_recycle ON links (recycle_from, id) WHERE recycle_from IS NOT NULL;

-- Codes waiting to be issued, per length, taken lowest (score, tiebreak, code) first.
CREATE TABLE pool (
    code     TEXT PRIMARY KEY,
    length   SMALLINT NOT NULL,
    score    BIGINT   NOT NULL,
    tiebreak BIGINT   NOT NULL
);
CREATE INDEX pool_order ON pool (length, score, tiebreak, code);

-- Id segments: an instance reserves a block of link ids with one UPDATE.
CREATE TABLE id_blocks (
    name TEXT PRIMARY KEY,
    next BIGINT NOT NULL
);
INSERT INTO id_blocks (name, next) VALUES ('link', 1);

-- Counters, spread over shards so that concurrent writers rarely wait on one row.
-- Names: links:<status>, creates:<day>, visits:<day>, pool:<length>:generated|recycled.
CREATE TABLE counters (
    name  TEXT     NOT NULL,
    shard SMALLINT NOT NULL,
    n     BIGINT   NOT NULL,
    PRIMARY KEY (name, shard)
);

-- Generated keys, strategy states and the like.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);

-- Visits: the record as JSON, by id; ids come from a sequence.
CREATE SEQUENCE visit_ids;
CREATE TABLE visits (
    id      BIGINT PRIMARY KEY,
    link_id BIGINT NOT NULL,
    at      BIGINT NOT NULL,
    record  JSONB  NOT NULL
);
CREATE INDEX visits_link ON visits (link_id, id);
CREATE INDEX visits_at ON visits (at);

-- Counters of visits, added to per batch (INSERT … ON CONFLICT DO UPDATE SET n = n + …).
CREATE TABLE visit_hours (
    link_id BIGINT NOT NULL,
    hour    BIGINT NOT NULL,
    visits  BIGINT NOT NULL,
    bots    BIGINT NOT NULL,
    PRIMARY KEY (link_id, hour)
);
CREATE TABLE visit_dims (
    link_id BIGINT   NOT NULL,
    day     BIGINT   NOT NULL,
    dim     SMALLINT NOT NULL,
    value   TEXT     NOT NULL,
    n       BIGINT   NOT NULL,
    PRIMARY KEY (link_id, day, dim, value)
);
-- Distinct non-bot clients of a link's day: the sketch the domain merges (visits::hll).
CREATE TABLE visit_uniques (
    link_id BIGINT NOT NULL,
    day     BIGINT NOT NULL,
    sketch  BYTEA  NOT NULL,
    PRIMARY KEY (link_id, day)
);
CREATE TABLE visit_totals (
    link_id BIGINT PRIMARY KEY,
    visits  BIGINT NOT NULL,
    bots    BIGINT NOT NULL
);
