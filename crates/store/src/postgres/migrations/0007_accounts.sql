-- Schema version 7: people and their rights. `accounts` holds every account record (users,
-- teams, memberships, identities, run-time keys) as JSON bytes by kind and id; the one row of
-- `accounts_version` is raised by every write, which names the version it was checked against
-- (`UPDATE … WHERE version = $1`), so that a rule spanning records holds between instances.
-- `audit` is the audit log, ids from its own sequence.
CREATE TABLE accounts (
    kind TEXT  NOT NULL,
    id   TEXT  NOT NULL,
    body BYTEA NOT NULL,
    PRIMARY KEY (kind, id)
);

CREATE TABLE accounts_version (
    one     BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    version BIGINT  NOT NULL
);
INSERT INTO accounts_version (version) VALUES (0);

CREATE TABLE audit (
    id     BIGSERIAL PRIMARY KEY,
    at     BIGINT NOT NULL,
    actor  TEXT   NOT NULL,
    action TEXT   NOT NULL,
    target TEXT   NOT NULL,
    ip     TEXT   NOT NULL,
    team   TEXT,
    count  BIGINT
);
CREATE INDEX audit_at ON audit (at);
