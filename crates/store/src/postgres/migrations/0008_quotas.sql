-- Schema version 8: plans' usage counters (SPEC §25), by name: a team's links this month, its
-- active links, its visits this month. A take locks its row (`FOR UPDATE`), so concurrent
-- creates on every instance see each other's takes and never pass a limit together. A counter
-- that is missing is counted again from the records by whoever needs it first.
CREATE TABLE quotas (
    key  TEXT   PRIMARY KEY,
    used BIGINT NOT NULL CHECK (used >= 0)
);
