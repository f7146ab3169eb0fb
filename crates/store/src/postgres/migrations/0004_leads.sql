-- Schema version 4: leads left through links' forms before the destination. `lead_values`
-- holds the [name, value] pairs in the form's order; `consent` the consent text the visitor
-- ticked (NULL: the form had none). Ids come from one sequence, so a cursor is global.
CREATE SEQUENCE lead_ids;

CREATE TABLE leads (
    link_id     BIGINT NOT NULL,
    id          BIGINT NOT NULL,
    at          BIGINT NOT NULL,
    lead_values JSONB  NOT NULL,
    consent     TEXT,
    PRIMARY KEY (link_id, id)
);
