-- Schema version 10: HTTPS's certificate state (SPEC §26): the ACME account, each host's
-- certificate chain and key, and the answers to challenges being validated, by key. One
-- instance orders (under the job lock) and writes; every instance reads what it serves.
-- (Version 9 is the domains' table, added on another branch.)
CREATE TABLE tls (
    key   TEXT  PRIMARY KEY,
    value BYTEA NOT NULL
);
