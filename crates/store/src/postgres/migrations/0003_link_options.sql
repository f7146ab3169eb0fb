-- Schema version 3: what a link does beyond one URL. `options` holds the password hash, the
-- visit cap, the start time, the end destination, the rules and the targets (NULL for a plain
-- link); `ended_by` says why an expired link ended (1 its expiry, 2 its visit cap).
ALTER TABLE links ADD COLUMN options JSONB, ADD COLUMN ended_by SMALLINT;

-- Redirects counted against caps, by link and slot (0 the link, n + 1 target n). A claim
-- raises its rows with one UPDATE … WHERE used < cap, so instances never pass a cap together.
CREATE TABLE link_claims (
    link_id BIGINT NOT NULL,
    slot    INT    NOT NULL,
    used    BIGINT NOT NULL,
    PRIMARY KEY (link_id, slot)
);
