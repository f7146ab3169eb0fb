//! Links in PostgreSQL: creates (pool take or custom code, with dedup), reads, patches,
//! deletes, the lifecycle transitions, listings and imports.
//!
//! Which transitions are allowed and what a patch does are the domain's rules
//! ([`LinkStatus::deletable`], [`LinkStatus::recyclable`], [`LinkPatch::apply`],
//! [`Link::is_dedup_target`]); this file only persists them, each change in one transaction
//! that also notifies the other instances.

use std::collections::{BTreeMap, HashMap};

use deadpool_postgres::GenericClient;

use super::{
    bump, counter, db_error, ended_by_code, link_of, notify, options_json, rust_ms, sql_ms,
    status_code, status_counter, Cached, PgStore, Shared, DAY_MS, LINK_COLUMNS,
};
use tokio_postgres::types::Json;

use crate::model::{code_key, split_key, LinkOptions};
use crate::{
    is_keepable_id, ActiveEntry, CodeChoice, CreateDone, Created, Imported, Link, LinkCounts,
    LinkPage, LinkPatch, LinkQuery, LinkStatus, LinkStore, Millis, NewLink, StoreError,
    StoreResult,
};

/// Takes the lowest due code of a pool; a code another transaction is taking is skipped, not
/// waited for.
const TAKE: &str = "DELETE FROM pool WHERE code = (
        SELECT code FROM pool WHERE length = $1 AND score <= $2
        ORDER BY score, tiebreak, code LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING code";

/// Inserts a link row unless its id or its code is taken (either makes it return no row).
const INSERT: &str = "INSERT INTO links
        (id, code, url, space, custom, created_at, expires_at, status, title, tags, updated_at,
         deleted_at, recycle_from, options, ended_by, domain)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
    ON CONFLICT DO NOTHING RETURNING id";

/// Why an insert returned no row.
enum Refused {
    /// Another live link owns the code.
    CodeOwned,
    /// The id was taken (an import placed a record inside this instance's segment).
    IdTaken,
}

async fn insert_link(client: &impl GenericClient, link: &Link) -> StoreResult<Option<Refused>> {
    let tags: &[String] = &link.tags;
    let inserted = client
        .row_opt(
            INSERT,
            &[
                &sql_ms(link.id),
                &link.code,
                &link.url,
                &link.space,
                &link.custom,
                &sql_ms(link.created_at),
                &link.expires_at.map(sql_ms),
                &status_code(link.status),
                &link.title,
                &tags,
                &sql_ms(link.updated_at),
                &link.deleted_at.map(sql_ms),
                &(link.status.recyclable())
                    .then(|| link.ended_at())
                    .flatten()
                    .map(sql_ms),
                &options_json(link),
                &ended_by_code(link.ended_by),
                &i32::from(link.domain),
            ],
        )
        .await
        .map_err(db_error)?;
    if inserted.is_some() {
        return Ok(None);
    }
    Ok(Some(if owner(client, &link.key()).await?.is_some() {
        Refused::CodeOwned
    } else {
        Refused::IdTaken
    }))
}

/// The live (not archived) link that owns a code on its domain (a key of
/// [`crate::model::code_key`]).
async fn owner(client: &impl GenericClient, key: &str) -> StoreResult<Option<Link>> {
    let (code, domain) = split_key(key);
    client
        .row_opt(
            &format!(
                "SELECT {LINK_COLUMNS} FROM links WHERE code = $1 AND domain = $2 AND status <> 3"
            ),
            &[&code, &i32::from(domain)],
        )
        .await
        .map_err(db_error)?
        .map(|row| link_of(&row))
        .transpose()
}

/// The owner of a code, locked until the transaction ends.
async fn owner_for_update(client: &impl GenericClient, key: &str) -> StoreResult<Link> {
    let (code, domain) = split_key(key);
    client
        .row_opt(
            &format!(
                "SELECT {LINK_COLUMNS} FROM links
                 WHERE code = $1 AND domain = $2 AND status <> 3 FOR UPDATE"
            ),
            &[&code, &i32::from(domain)],
        )
        .await
        .map_err(db_error)?
        .map(|row| link_of(&row))
        .transpose()?
        .ok_or(StoreError::NotFound)
}

fn code_length(code: &str) -> i32 {
    i32::try_from(code.len()).unwrap_or(i32::MAX)
}

/// Escapes `%`, `_` and `\` for a LIKE pattern.
fn like_pattern(q: &str) -> String {
    let mut out = String::with_capacity(q.len() + 2);
    out.push('%');
    for c in q.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

impl LinkStore for PgStore {
    /// Runs on the driver's runtime; the caller's thread goes on at once.
    fn submit_create(&self, new: NewLink, done: CreateDone) {
        let Some(runtime) = &self.runtime else {
            done(Err(StoreError::Unavailable("the store is closing".into())));
            return;
        };
        let shared = self.shared.clone();
        runtime.spawn(async move { done(shared.create_link(&new).await) });
    }

    fn resolve(&self, key: &str) -> StoreResult<Option<ActiveEntry>> {
        let (code, domain) = split_key(key);
        self.block(async {
            let client = self.shared.client().await?;
            let row = client
                .row_opt(
                    "SELECT id, url, expires_at, options, review->>'verdict' = 'blocked'
                     FROM links WHERE code = $1 AND domain = $2 AND status = 0",
                    &[&code, &i32::from(domain)],
                )
                .await
                .map_err(db_error)?;
            Ok(row.map(|row| ActiveEntry {
                id: rust_ms(row.get(0)),
                url: row.get(1),
                expires_at: row.get::<_, Option<i64>>(2).map(rust_ms),
                options: row
                    .get::<_, Option<Json<LinkOptions>>>(3)
                    .map(|Json(options)| Box::new(options)),
                blocked: row.get::<_, Option<bool>>(4).unwrap_or(false),
            }))
        })
    }

    /// The code filter is not consulted: another instance may have issued the code a moment
    /// ago, and only the database knows. Unknown codes cost one indexed lookup (and count
    /// against `limits.rates.not_found_per_ip`).
    fn may_exist(&self, _code: &str) -> bool {
        true
    }

    fn link_by_code(&self, code: &str) -> StoreResult<Option<Link>> {
        self.block(async {
            let client = self.shared.client().await?;
            owner(&client, code).await
        })
    }

    fn link_by_id(&self, id: u64) -> StoreResult<Option<Link>> {
        self.block(async {
            let client = self.shared.client().await?;
            client
                .row_opt(
                    &format!("SELECT {LINK_COLUMNS} FROM links WHERE id = $1"),
                    &[&sql_ms(id)],
                )
                .await
                .map_err(db_error)?
                .map(|row| link_of(&row))
                .transpose()
        })
    }

    fn update_link(&self, code: &str, patch: &LinkPatch, now: Millis) -> StoreResult<Link> {
        self.block(async {
            let mut client = self.shared.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            let old = owner_for_update(&tx, code).await?;
            if old.status != LinkStatus::Active {
                return Err(StoreError::WrongStatus(old.status));
            }
            let link = patch.apply(&old, now);
            let tags: &[String] = &link.tags;
            tx.exec(
                "UPDATE links SET url = $2, expires_at = $3, title = $4, tags = $5, updated_at = $6,
                     options = $7, ended_by = $8, review = $9
                 WHERE id = $1",
                &[
                    &sql_ms(link.id),
                    &link.url,
                    &link.expires_at.map(sql_ms),
                    &link.title,
                    &tags,
                    &sql_ms(now),
                    &options_json(&link),
                    &ended_by_code(link.ended_by),
                    &link.review.as_ref().map(Json),
                ],
            )
            .await
            .map_err(db_error)?;
            notify(&tx, code).await?;
            tx.commit().await.map_err(db_error)?;
            Ok(link)
        })
    }

    fn delete_link(&self, code: &str, now: Millis) -> StoreResult<Link> {
        self.block(async {
            let mut client = self.shared.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            let old = owner_for_update(&tx, code).await?;
            if !old.status.deletable() {
                return Err(StoreError::WrongStatus(old.status));
            }
            let mut link = old.clone();
            link.status = LinkStatus::Deleted;
            link.deleted_at = Some(now);
            link.updated_at = now;
            // It waits for recycling from its deletion (an expired one, no longer from expiry).
            tx.exec(
                "UPDATE links SET status = $2, deleted_at = $3, updated_at = $3, recycle_from = $3
                 WHERE id = $1",
                &[
                    &sql_ms(link.id),
                    &status_code(LinkStatus::Deleted),
                    &sql_ms(now),
                ],
            )
            .await
            .map_err(db_error)?;
            bump(
                &tx,
                &[
                    (status_counter(old.status), -1),
                    (status_counter(LinkStatus::Deleted), 1),
                ],
            )
            .await?;
            notify(&tx, code).await?;
            tx.commit().await.map_err(db_error)?;
            Ok(link)
        })
    }

    /// One transaction per link: each is an indexed update that takes no lock the redirects
    /// wait behind.
    fn expire_links(&self, ids: &[u64], now: Millis) -> StoreResult<Vec<Link>> {
        self.block(async {
            let mut expired = Vec::with_capacity(ids.len());
            for &id in ids {
                expired.extend(self.shared.expire_link(id, now).await?);
            }
            Ok(expired)
        })
    }

    fn recycle_link(&self, id: u64, score: Millis) -> StoreResult<Option<Link>> {
        self.block(async {
            let mut client = self.shared.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            let row = tx
                .row_opt(
                    &format!("SELECT {LINK_COLUMNS} FROM links WHERE id = $1 FOR UPDATE"),
                    &[&sql_ms(id)],
                )
                .await
                .map_err(db_error)?;
            let Some(row) = row else {
                return Ok(None);
            };
            let old = link_of(&row)?;
            if !old.status.recyclable() {
                return Ok(None);
            }
            tx.exec(
                "UPDATE links SET status = 3, recycle_from = NULL WHERE id = $1",
                &[&sql_ms(id)],
            )
            .await
            .map_err(db_error)?;
            // A live link owns its code (the unique index says so), so the code is free now.
            let length = i16::try_from(old.code.len()).unwrap_or(i16::MAX);
            let pooled = tx
                .exec(
                    "INSERT INTO pool (code, length, score, tiebreak) VALUES ($1, $2, $3, 0)
                     ON CONFLICT (code) DO NOTHING",
                    &[&old.code, &length, &sql_ms(score)],
                )
                .await
                .map_err(db_error)?;
            bump(
                &tx,
                &[
                    (status_counter(old.status), -1),
                    (status_counter(LinkStatus::Archived), 1),
                    (
                        format!("pool:{length}:recycled"),
                        i64::try_from(pooled).unwrap_or(0),
                    ),
                ],
            )
            .await?;
            notify(&tx, &old.key()).await?;
            tx.commit().await.map_err(db_error)?;
            let mut link = old;
            link.status = LinkStatus::Archived;
            Ok(Some(link))
        })
    }

    fn list_links(&self, query: &LinkQuery) -> StoreResult<LinkPage> {
        self.block(async {
            let client = self.shared.client().await?;
            let limit = i64::try_from(query.limit.max(1)).unwrap_or(i64::MAX);
            let (cmp, order) = if query.newest_first {
                ("<", "DESC")
            } else {
                (">", "ASC")
            };
            let after =
                query
                    .after
                    .map(sql_ms)
                    .unwrap_or(if query.newest_first { i64::MAX } else { 0 });
            let status = query.status.map(status_code);
            let length = query.length.map(i32::from);
            let q = query.q.as_deref().map(like_pattern);
            let sql = format!(
                "SELECT {LINK_COLUMNS} FROM links
                 WHERE id {cmp} $1
                   AND ($2::text IS NULL OR space = $2)
                   AND ($3::smallint IS NULL OR status = $3)
                   AND ($4::int IS NULL OR length(code) = $4)
                   AND ($5::text IS NULL OR code ILIKE $5 OR url ILIKE $5 OR title ILIKE $5
                        OR EXISTS (SELECT 1 FROM unnest(tags) AS t WHERE t ILIKE $5))
                   AND ($7::int IS NULL OR domain = $7)
                 ORDER BY id {order} LIMIT $6"
            );
            let domain = query.domain.map(i32::from);
            let rows = client
                .rows(
                    &sql,
                    &[&after, &query.space, &status, &length, &q, &limit, &domain],
                )
                .await
                .map_err(db_error)?;
            let items = rows
                .iter()
                .map(link_of)
                .collect::<StoreResult<Vec<Link>>>()?;
            let next = (items.len() as i64 == limit)
                .then(|| items.last().map(|l| l.id))
                .flatten();
            Ok(LinkPage { items, next })
        })
    }

    fn due_for_expiry(&self, now: Millis, limit: usize) -> StoreResult<Vec<Link>> {
        self.block(async {
            self.shared
                .links_where(
                    "status = 0 AND expires_at <= $1 ORDER BY expires_at, id",
                    now,
                    limit,
                )
                .await
        })
    }

    fn due_for_recycling(&self, ended_before: Millis, limit: usize) -> StoreResult<Vec<Link>> {
        self.block(async {
            self.shared
                .links_where(
                    "recycle_from < $1 ORDER BY recycle_from, id",
                    ended_before,
                    limit,
                )
                .await
        })
    }

    fn retire_link(&self, id: u64) -> StoreResult<bool> {
        self.block(async {
            let client = self.shared.client().await?;
            let n = client
                .exec(
                    "UPDATE links SET recycle_from = NULL WHERE id = $1 AND recycle_from IS NOT NULL",
                    &[&sql_ms(id)],
                )
                .await
                .map_err(db_error)?;
            Ok(n == 1)
        })
    }

    /// Writes whole records (import) in one transaction; see
    /// [`crate::LinkStore::import_links`]. A batch costs a handful of statements, whatever
    /// its size: owners and taken ids are read for the whole batch, the new rows written with
    /// one insert from a JSON array.
    fn import_links(&self, batch: &[Link]) -> StoreResult<Vec<Imported>> {
        self.block(async {
            let mut client = self.shared.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            let codes: Vec<&str> = batch
                .iter()
                .filter(|l| l.status != LinkStatus::Archived)
                .map(|l| l.code.as_str())
                .collect();
            let mut owners: HashMap<String, Link> = HashMap::new();
            for row in tx
                .rows(
                    &format!(
                        "SELECT {LINK_COLUMNS} FROM links WHERE code = ANY($1) AND status <> 3"
                    ),
                    &[&codes],
                )
                .await
                .map_err(db_error)?
            {
                let link = link_of(&row)?;
                owners.insert(link.key().into_owned(), link);
            }
            let ids: Vec<i64> = batch
                .iter()
                .filter(|l| is_keepable_id(l.id))
                .map(|l| sql_ms(l.id))
                .collect();
            let mut by_id: HashMap<u64, Link> = HashMap::new();
            for row in tx
                .rows(
                    &format!("SELECT {LINK_COLUMNS} FROM links WHERE id = ANY($1)"),
                    &[&ids],
                )
                .await
                .map_err(db_error)?
            {
                let link = link_of(&row)?;
                by_id.insert(link.id, link);
            }
            let mut results = Vec::with_capacity(batch.len());
            let mut fresh: Vec<Link> = Vec::new();
            for link in batch {
                let existing = if link.status == LinkStatus::Archived {
                    // An archived record owns no code: it is matched by id.
                    by_id.get(&link.id).map(|e| (e, e == link))
                } else {
                    owners
                        .get(link.key().as_ref())
                        .map(|e| (e, e.url == link.url))
                };
                if let Some((existing, same)) = existing {
                    results.push(if same {
                        Imported::Unchanged(existing.clone())
                    } else {
                        Imported::Conflict(existing.clone())
                    });
                    continue;
                }
                let mut record = link.clone();
                // A record keeps its id when it is free and one the store could have given (so
                // the id blocks never run past MAX_LINK_ID). (Import runs alone, from the command
                // line: a second connection for a new id block cannot starve anyone.)
                while !is_keepable_id(record.id) || by_id.contains_key(&record.id) {
                    record.id = self.shared.next_link_id().await?;
                }
                // Later records of this batch see this one as taken.
                by_id.insert(record.id, record.clone());
                if record.status != LinkStatus::Archived {
                    owners.insert(record.key().into_owned(), record.clone());
                }
                results.push(Imported::Created(record.clone()));
                fresh.push(record);
            }
            if fresh.is_empty() {
                tx.commit().await.map_err(db_error)?;
                return Ok(results);
            }
            let live: Vec<&str> = fresh
                .iter()
                .filter(|l| l.status != LinkStatus::Archived)
                .map(|l| l.code.as_str())
                .collect();
            tx.exec("DELETE FROM pool WHERE code = ANY($1)", &[&live])
                .await
                .map_err(db_error)?;
            let rows: Vec<serde_json::Value> = fresh.iter().map(import_row).collect();
            let inserted = tx
                .exec(
                    "INSERT INTO links
                         (id, code, url, space, custom, created_at, expires_at, status, title, tags,
                          updated_at, deleted_at, recycle_from, options, ended_by, review, domain)
                     SELECT id, code, url, space, custom, created_at, expires_at, status, title,
                            tags, updated_at, deleted_at, recycle_from, options, ended_by, review,
                            domain
                     FROM jsonb_to_recordset($1::jsonb) AS r(
                         id bigint, code text, url text, space text, custom boolean,
                         created_at bigint, expires_at bigint, status smallint, title text,
                         tags text[], updated_at bigint, deleted_at bigint, recycle_from bigint,
                         options jsonb, ended_by smallint, review jsonb, domain integer)",
                    &[&serde_json::Value::Array(rows)],
                )
                .await
                .map_err(db_error)?;
            if inserted != fresh.len() as u64 {
                return Err(StoreError::Backend(format!(
                    "import wrote {inserted} of {} links",
                    fresh.len()
                )));
            }
            let live_keys: Vec<String> = fresh
                .iter()
                .filter(|l| l.status != LinkStatus::Archived)
                .map(|l| l.key().into_owned())
                .collect();
            tx.exec(
                "SELECT pg_notify($1, code) FROM unnest($2::text[]) AS code",
                &[&super::CHANNEL, &live_keys],
            )
            .await
            .map_err(db_error)?;
            // New segments start past every imported id.
            let highest = fresh.iter().map(|l| l.id).max().unwrap_or(0);
            tx.exec(
                "UPDATE id_blocks SET next = greatest(next, $1) WHERE name = 'link'",
                &[&sql_ms(highest.saturating_add(1))],
            )
            .await
            .map_err(db_error)?;
            let mut deltas: BTreeMap<String, i64> = BTreeMap::new();
            for record in &fresh {
                *deltas.entry(status_counter(record.status)).or_default() += 1;
                *deltas
                    .entry(format!("creates:{}", record.created_at / DAY_MS))
                    .or_default() += 1;
            }
            let deltas: Vec<(String, i64)> = deltas.into_iter().collect();
            bump(&tx, &deltas).await?;
            tx.commit().await.map_err(db_error)?;
            Ok(results)
        })
    }

    fn dedup_target(
        &self,
        space: &str,
        domain: u16,
        length: u8,
        url: &str,
    ) -> StoreResult<Option<Link>> {
        self.block(async {
            let client = self.shared.client().await?;
            dedup_in(&client, space, domain, length, url, None).await
        })
    }

    fn link_counts(&self) -> StoreResult<LinkCounts> {
        self.block(async {
            let client = self.shared.client().await?;
            let client = &client;
            Ok(LinkCounts {
                active: counter(client, &status_counter(LinkStatus::Active)).await?,
                expired: counter(client, &status_counter(LinkStatus::Expired)).await?,
                deleted: counter(client, &status_counter(LinkStatus::Deleted)).await?,
                archived: counter(client, &status_counter(LinkStatus::Archived)).await?,
            })
        })
    }
}

impl Shared {
    pub(super) async fn create_link(&self, new: &NewLink) -> StoreResult<Created> {
        'attempt: loop {
            // Before the transaction's connection: a spent segment needs a connection of its
            // own, and a create holding one while waiting for another could starve the pool.
            let id = self.next_link_id().await?;
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            let generated = matches!(new.code, CodeChoice::Pool(_) | CodeChoice::Computed(_));
            if generated && new.dedup {
                // Two instances creating the same URL at once must agree on one link.
                let length = new.length();
                tx.exec(
                    "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                    &[&format!(
                        "dedup:{}:{length}:{}",
                        code_key(new.domain, &new.space),
                        new.url
                    )],
                )
                .await
                .map_err(db_error)?;
                if let Some(link) =
                    dedup_in(&tx, &new.space, new.domain, length, &new.url, Some(new.now)).await?
                {
                    tx.commit().await.map_err(db_error)?;
                    return Ok(Created::Existing(link));
                }
            }
            // The codes to try, in order.
            let codes: Vec<String> = match &new.code {
                CodeChoice::Pool(length) => {
                    let taken = tx
                        .row_opt(TAKE, &[&i16::from(*length), &sql_ms(new.now)])
                        .await
                        .map_err(db_error)?;
                    match taken {
                        Some(row) => vec![row.get::<_, String>(0)],
                        None => return Err(StoreError::PoolEmpty(*length)),
                    }
                }
                CodeChoice::Custom(code) => vec![code.clone()],
                CodeChoice::Computed(codes) => codes.clone(),
            };
            let custom = matches!(new.code, CodeChoice::Custom(_));
            let mut created = None;
            for code in codes {
                if !matches!(new.code, CodeChoice::Pool(_)) {
                    // Out of its pool first: a pool take of the same code holds that row, so
                    // the two wait on one lock instead of deadlocking on two.
                    tx.exec("DELETE FROM pool WHERE code = $1", &[&code])
                        .await
                        .map_err(db_error)?;
                }
                let link = new.record(id, &code, custom);
                match insert_link(&tx, &link).await? {
                    None => {
                        created = Some(link);
                        break;
                    }
                    Some(Refused::CodeOwned) => match &new.code {
                        CodeChoice::Custom(_) => return Err(StoreError::CodeTaken(code)),
                        // The next computed candidate.
                        CodeChoice::Computed(_) => continue,
                        CodeChoice::Pool(_) => {
                            // A pooled code that a link owns (a custom create raced a
                            // refill): the take removed it from the pool; keep that and take
                            // another.
                            tracing::error!(code = %code, "a pooled code is owned by a link; dropped it from the pool");
                            tx.commit().await.map_err(db_error)?;
                            continue 'attempt;
                        }
                    },
                    Some(Refused::IdTaken) => continue 'attempt,
                }
            }
            let Some(link) = created else {
                return Err(StoreError::PoolEmpty(new.length()));
            };
            bump(
                &tx,
                &[
                    (status_counter(LinkStatus::Active), 1),
                    (format!("creates:{}", new.now / DAY_MS), 1),
                ],
            )
            .await?;
            tx.commit().await.map_err(db_error)?;
            return Ok(Created::New(link));
        }
    }

    pub(super) async fn expire_link(&self, id: u64, now: Millis) -> StoreResult<Option<Link>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // Only an active link past its expiry; run twice (two instances), it expires once.
        let row = tx
            .row_opt(
                &format!(
                    "UPDATE links SET status = 1, updated_at = $2, recycle_from = expires_at
                     WHERE id = $1 AND status = 0 AND expires_at <= $2
                     RETURNING {LINK_COLUMNS}"
                ),
                &[&sql_ms(id), &sql_ms(now)],
            )
            .await
            .map_err(db_error)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let link = link_of(&row)?;
        bump(
            &tx,
            &[
                (status_counter(LinkStatus::Active), -1),
                (status_counter(LinkStatus::Expired), 1),
            ],
        )
        .await?;
        notify(&tx, &link.key()).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(Some(link))
    }

    async fn links_where(&self, filter: &str, at: Millis, limit: usize) -> StoreResult<Vec<Link>> {
        let client = self.client().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        client
            .rows(
                &format!("SELECT {LINK_COLUMNS} FROM links WHERE {filter} LIMIT $2"),
                &[&sql_ms(at), &limit],
            )
            .await
            .map_err(db_error)?
            .iter()
            .map(link_of)
            .collect()
    }
}

/// A link as a row of the import's JSON array (times as numbers, the recycling queue
/// derived from the status).
fn import_row(link: &Link) -> serde_json::Value {
    serde_json::json!({
        "id": sql_ms(link.id),
        "code": link.code,
        "url": link.url,
        "space": link.space,
        "custom": link.custom,
        "created_at": sql_ms(link.created_at),
        "expires_at": link.expires_at.map(sql_ms),
        "status": status_code(link.status),
        "title": link.title,
        "tags": link.tags,
        "updated_at": sql_ms(link.updated_at),
        "deleted_at": link.deleted_at.map(sql_ms),
        "recycle_from": link.status.recyclable().then(|| link.ended_at()).flatten().map(sql_ms),
        "options": link.options,
        "ended_by": ended_by_code(link.ended_by),
        "review": link.review,
        "domain": i32::from(link.domain),
    })
}

/// The dedup target of a space, length and URL: the oldest link that is one by the domain's
/// rule at `now` (or, without `now`, any active generated one).
async fn dedup_in(
    client: &impl GenericClient,
    space: &str,
    domain: u16,
    length: u8,
    url: &str,
    now: Option<Millis>,
) -> StoreResult<Option<Link>> {
    let rows = client
        .rows(
            &format!(
                "SELECT {LINK_COLUMNS} FROM links
                 WHERE space = $1 AND domain = $4 AND md5(url) = md5($2) AND url = $2
                   AND length(code) = $3 AND status = 0 AND NOT custom
                 ORDER BY id LIMIT 8"
            ),
            &[&space, &url, &i32::from(length), &i32::from(domain)],
        )
        .await
        .map_err(db_error)?;
    for row in rows {
        let link = link_of(&row)?;
        let eligible = match now {
            Some(now) => link.is_dedup_target(now),
            None => link.status == LinkStatus::Active,
        };
        if eligible && code_length(&link.code) == i32::from(length) {
            return Ok(Some(link));
        }
    }
    Ok(None)
}
