-- Schema version 5: the review of destinations. `links.review` holds a link's latest verdict
-- ({"verdict", "score", "reason", "at"}; NULL: never reviewed), read with the link by every
-- redirect, so a blocked link stops on every instance at once.
ALTER TABLE links ADD COLUMN review JSONB;

-- The queue: at most one entry per link, drained oldest first by `FOR UPDATE SKIP LOCKED`, so
-- that instances share the work and each link is reviewed once. A taken entry is leased; an
-- instance that dies mid-review leaves it to be taken again when the lease ends.
CREATE TABLE review_queue (
    link_id      BIGINT   PRIMARY KEY,
    trigger      SMALLINT NOT NULL,
    at           BIGINT   NOT NULL,
    leased_until BIGINT   NOT NULL DEFAULT 0,
    -- Queued again while leased (the link changed during its review): kept, not deleted,
    -- when that review finishes.
    requeue      BOOLEAN  NOT NULL DEFAULT false
);
CREATE INDEX review_queue_by_time ON review_queue (at);

-- Finished reviews, each with what its checks found; the screenshot apart, read only by the
-- review page.
CREATE SEQUENCE review_ids;
CREATE TABLE reviews (
    id         BIGINT PRIMARY KEY,
    link_id    BIGINT NOT NULL,
    at         BIGINT NOT NULL,
    record     JSONB  NOT NULL,
    screenshot BYTEA
);
CREATE INDEX reviews_by_link ON reviews (link_id, id);

-- Each reviewed link's latest verdict (1 ok, 2 flagged, 3 blocked, 4 unscored), for the
-- listing by verdict.
CREATE TABLE review_verdicts (
    link_id BIGINT   PRIMARY KEY,
    verdict SMALLINT NOT NULL
);
CREATE INDEX review_verdicts_by_verdict ON review_verdicts (verdict, link_id);
