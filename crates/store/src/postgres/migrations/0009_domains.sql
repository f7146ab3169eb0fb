-- Schema version 9: domains (SPEC §26). A link belongs to one domain (0: the default domain,
-- every link written before), and its code is unique there: the code index becomes
-- (code, domain), the dedup index gains the domain. Domains are few records, each as JSON by
-- id, its host unique; ids come from `id_blocks` ('domain') and are never given twice.
ALTER TABLE links ADD COLUMN domain INTEGER NOT NULL DEFAULT 0;
DROP INDEX links_code_owner;
CREATE UNIQUE INDEX links_code_owner ON links (code, domain) WHERE status <> 3;
DROP INDEX links_dedup;
CREATE INDEX links_dedup ON links (space, domain, md5(url)) WHERE status = 0 AND NOT custom;
CREATE INDEX links_domain ON links (domain) WHERE domain <> 0 AND status <> 3;

CREATE TABLE domains (
    id     INTEGER PRIMARY KEY,
    host   TEXT    NOT NULL UNIQUE,
    record JSONB   NOT NULL
);
INSERT INTO id_blocks (name, next) VALUES ('domain', 1);
