//! The PostgreSQL `Store`: several vshortlink instances share one database (see
//! docs/operations.md, "Several instances on PostgreSQL"). Only `store/postgres/` knows about
//! PostgreSQL.
//!
//! The seam is blocking (`Store` methods return values, as sled's do), so this store owns a
//! small tokio runtime of its own for the driver and blocks on it (`runtime.rs`).
//!
//! What keeps several instances right:
//! - a code has one owner by a unique index, so a pool take (`FOR UPDATE SKIP LOCKED`) and a
//!   custom create can never issue one code twice;
//! - link ids come from segments reserved with one `UPDATE` per block;
//! - every change to a link notifies `vsl_links` with its code, and each instance's `watch`
//!   listener evicts its cache entry (see `watch.rs`); the code filter is not consulted, so a
//!   code another instance just issued is found in the database at once;
//! - the lifecycle job holds a session advisory lock (`Store::job_lock`);
//! - migrations run under an advisory lock, one instance at a time.
//!
//!
//! This file holds the store's struct, opening, what every file uses (error mapping, column
//! conversions, cached statements, sharded counters, notifications, link id segments), and the
//! implementations of `MetaStore`, `StoreOps` and `Cluster`, which are short enough to live
//! here. The other capability traits are implemented in the file that owns them (named in
//! brackets), each method blocking on that file's async code:
//!
//! | file | owns |
//! |---|---|
//! | `runtime.rs` | the driver's runtime, waiting on it (`block`), shutting it down on drop |
//! | `schema.rs` | the migrations (`migrations/`), applied under an advisory lock |
//! | `links.rs` | creates, reads, patches, deletes, lifecycle transitions, listings, imports of links (`LinkStore`) |
//! | `pools.rs` | the code pools: refills, levels, peeks (`PoolStore`) |
//! | `tls.rs` | HTTPS's certificate state, by key (`TlsStore`) |
//! | `quotas.rs` | plans' usage counters, each take locking its row (`QuotaStore`) |
//! | `visits.rs` | visits and their counters, listings, summaries, pruning, the day counts (`VisitStore`) |
//! | `check.rs` | `vshortlink check`: what the schema does not enforce, read in one snapshot |
//! | `claims.rs` | visit caps: the `link_claims` rows (`CapStore`) |
//! | `leads.rs` | leads left through links' forms (`LeadStore`) |
//! | `reviews.rs` | the review queue, finished reviews, each link's latest verdict (`ReviewStore`) |
//! | `outbox.rs` | the webhook outbox (heads taken by `FOR UPDATE SKIP LOCKED`), the delivery log (`OutboxStore`) |
//! | `accounts.rs` | account records under one version, the audit log (`AccountStore`) |
//! | `records.rs` | [`SharedRecords`]: page sessions and batch results every instance reads |
//! | `watch.rs` | the `LISTEN` connection that keeps this instance's caches in step |

mod accounts;
mod check;
mod claims;
mod domains;
mod leads;
mod links;
mod outbox;
mod pools;
mod quotas;
mod records;
mod reviews;
mod runtime;
mod schema;
mod tls;
mod visits;
mod watch;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::GenericClient;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use parking_lot::Mutex;
use tokio::runtime::Runtime;
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row};

use tokio_postgres::types::Json;

use crate::model::{EndedBy, LinkOptions, ReviewMark};
use crate::prelude::*;
use crate::{
    ChangeHandler, CommitStats, JobLock, Link, LinkStatus, Millis, SharedRecords, StorageFault,
    StoreError, StoreResult,
};

/// Link ids reserved per round trip.
const ID_BLOCK: i64 = 1024;
/// Counter rows per name: a writer adds to the row of its connection (backend pid modulo
/// this), so concurrent transactions of one instance never wait on one another's counter rows
/// until commit, and those of several instances seldom do.
const COUNTER_SHARDS: i32 = 1024;
/// The notification channel of link changes.
const CHANNEL: &str = "vsl_links";
use crate::model::time::DAY_MS;

/// How to reach the database.
#[derive(Clone, Debug)]
pub struct PgOptions {
    /// `postgres://user:password@host:port/database`.
    pub url: String,
    /// Connections kept at most.
    pub pool_size: usize,
}

/// The PostgreSQL-backed store.
pub struct PgStore {
    shared: Arc<Shared>,
    /// The driver's runtime; `None` only while dropping.
    runtime: Option<Runtime>,
}

/// What the store's async code works with.
struct Shared {
    pool: Pool,
    config: tokio_postgres::Config,
    /// This instance's reserved link ids: `next..end`.
    ids: Mutex<(i64, i64)>,
    /// Held while a new block is reserved, so that the creates that find the segment spent
    /// at the same moment wait for one reservation rather than each making its own.
    reserving: tokio::sync::Mutex<()>,
}

/// Maps a driver error: lost connections and refused ones are the storage being unavailable
/// (503), anything else a backend failure.
fn db_error(e: tokio_postgres::Error) -> StoreError {
    use tokio_postgres::error::SqlState;
    let io = std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>());
    // A database that refuses writes (its disk full, or a read-only replica after a
    // failover) is the storage's state, not a server bug: 507 and 503 like sled's, and the
    // redirects, which only read, go on.
    match e.code() {
        Some(c) if *c == SqlState::DISK_FULL => StoreError::Full(format!("postgres: {e}")),
        Some(c)
            if *c == SqlState::READ_ONLY_SQL_TRANSACTION
                || *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CANNOT_CONNECT_NOW =>
        {
            StoreError::Unavailable(format!("postgres: {e}"))
        }
        _ if e.is_closed() || io => StoreError::Unavailable(format!("postgres: {e}")),
        _ => StoreError::Backend(format!("postgres: {e}")),
    }
}

fn pool_error(e: deadpool_postgres::PoolError) -> StoreError {
    StoreError::Unavailable(format!("postgres pool: {e}"))
}

/// Milliseconds as the database keeps them.
fn sql_ms(ms: Millis) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

fn rust_ms(ms: i64) -> Millis {
    u64::try_from(ms).unwrap_or(0)
}

fn status_code(status: LinkStatus) -> i16 {
    match status {
        LinkStatus::Active => 0,
        LinkStatus::Expired => 1,
        LinkStatus::Deleted => 2,
        LinkStatus::Archived => 3,
    }
}

fn status_of(code: i16) -> StoreResult<LinkStatus> {
    Ok(match code {
        0 => LinkStatus::Active,
        1 => LinkStatus::Expired,
        2 => LinkStatus::Deleted,
        3 => LinkStatus::Archived,
        other => {
            return Err(StoreError::Corrupt {
                tree: "links",
                detail: format!("status {other}"),
            })
        }
    })
}

/// The columns every link query selects, in [`link_of`]'s order.
const LINK_COLUMNS: &str =
    "id, code, url, space, custom, created_at, expires_at, status, title, tags, \
     updated_at, deleted_at, options, ended_by, review, domain";

fn link_of(row: &Row) -> StoreResult<Link> {
    Ok(Link {
        id: rust_ms(row.get(0)),
        code: row.get(1),
        url: row.get(2),
        space: row.get(3),
        custom: row.get(4),
        created_at: rust_ms(row.get(5)),
        expires_at: row.get::<_, Option<i64>>(6).map(rust_ms),
        status: status_of(row.get(7))?,
        title: row.get(8),
        tags: row.get(9),
        updated_at: rust_ms(row.get(10)),
        deleted_at: row.get::<_, Option<i64>>(11).map(rust_ms),
        options: row
            .get::<_, Option<Json<LinkOptions>>>(12)
            .map(|Json(options)| Box::new(options)),
        ended_by: ended_by_of(row.get(13)),
        review: row
            .get::<_, Option<Json<ReviewMark>>>(14)
            .map(|Json(review)| review),
        domain: u16::try_from(row.get::<_, i32>(15)).unwrap_or(0),
    })
}

fn ended_by_code(ended_by: Option<EndedBy>) -> Option<i16> {
    ended_by.map(|e| match e {
        EndedBy::Expiry => 1,
        EndedBy::MaxVisits => 2,
    })
}

fn ended_by_of(code: Option<i16>) -> Option<EndedBy> {
    match code? {
        2 => Some(EndedBy::MaxVisits),
        _ => Some(EndedBy::Expiry),
    }
}

/// A link's options as a column value.
fn options_json(link: &Link) -> Option<Json<&LinkOptions>> {
    link.options.as_deref().map(Json)
}

/// Queries through each connection's statement cache: a statement is parsed once per
/// connection, so a query costs one round trip instead of two (parse, then bind and run).
trait Cached: GenericClient + Sync {
    fn rows<'a>(
        &'a self,
        sql: &'a str,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Vec<Row>, tokio_postgres::Error>> + Send + 'a {
        async move {
            let statement = self.prepare_cached(sql).await?;
            self.query(&statement, params).await
        }
    }

    fn row_opt<'a>(
        &'a self,
        sql: &'a str,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Option<Row>, tokio_postgres::Error>> + Send + 'a {
        async move {
            let statement = self.prepare_cached(sql).await?;
            self.query_opt(&statement, params).await
        }
    }

    fn row<'a>(
        &'a self,
        sql: &'a str,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Row, tokio_postgres::Error>> + Send + 'a {
        async move {
            let statement = self.prepare_cached(sql).await?;
            self.query_one(&statement, params).await
        }
    }

    fn exec<'a>(
        &'a self,
        sql: &'a str,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<u64, tokio_postgres::Error>> + Send + 'a {
        async move {
            let statement = self.prepare_cached(sql).await?;
            self.execute(&statement, params).await
        }
    }
}

impl<T: GenericClient + Sync> Cached for T {}

/// Adds to counters, in the caller's transaction (names must differ within one call).
async fn bump(client: &impl GenericClient, deltas: &[(String, i64)]) -> StoreResult<()> {
    let deltas: Vec<&(String, i64)> = deltas.iter().filter(|(_, n)| *n != 0).collect();
    if deltas.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = deltas.iter().map(|(name, _)| name.as_str()).collect();
    let ns: Vec<i64> = deltas.iter().map(|(_, n)| *n).collect();
    client
        .exec(
            "INSERT INTO counters (name, shard, n)
             SELECT name, pg_backend_pid() % $2, n FROM unnest($1::text[], $3::bigint[]) AS u(name, n)
             ON CONFLICT (name, shard) DO UPDATE SET n = counters.n + excluded.n",
            &[&names, &COUNTER_SHARDS, &ns],
        )
        .await
        .map_err(db_error)?;
    Ok(())
}

/// The sum of a counter over its shards.
async fn counter(client: &impl GenericClient, name: &str) -> StoreResult<u64> {
    let row = client
        .row(
            "SELECT coalesce(sum(n), 0)::bigint FROM counters WHERE name = $1",
            &[&name],
        )
        .await
        .map_err(db_error)?;
    Ok(rust_ms(row.get(0)))
}

fn status_counter(status: LinkStatus) -> String {
    format!("links:{}", status.as_str())
}

/// Tells every instance (this one too) that the link owning `code` changed; delivered when
/// the caller's transaction commits.
async fn notify(client: &impl GenericClient, code: &str) -> StoreResult<()> {
    client
        .exec("SELECT pg_notify($1, $2)", &[&CHANNEL, &code])
        .await
        .map_err(db_error)?;
    Ok(())
}

impl PgStore {
    /// Connects, and creates or upgrades the schema (one instance at a time). Errors name the
    /// configuration key, because a wrong URL is the usual cause.
    pub fn open(options: &PgOptions) -> StoreResult<Self> {
        let config: tokio_postgres::Config = options.url.parse().map_err(|e| {
            StoreError::Backend(format!(
                "`storage.postgres.url` is not a PostgreSQL URL: {e}"
            ))
        })?;
        let runtime = runtime::build()?;
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(10)))
            .create_timeout(Some(Duration::from_secs(5)))
            .build()
            .map_err(|e| StoreError::Backend(format!("postgres pool: {e}")))?;
        let store = PgStore {
            shared: Arc::new(Shared {
                pool,
                config,
                ids: Mutex::new((0, 0)),
                reserving: tokio::sync::Mutex::new(()),
            }),
            runtime: Some(runtime),
        };
        let target = describe(&store.shared.config);
        store.block(store.shared.migrate()).map_err(|e| match e {
            StoreError::Unavailable(detail) | StoreError::Backend(detail) => {
                StoreError::Unavailable(format!(
                    "`storage.postgres.url`: cannot use PostgreSQL at {target}: {detail}"
                ))
            }
            other => other,
        })?;
        Ok(store)
    }

    /// Where the store connects, without the password (for logs).
    pub fn describe(&self) -> String {
        describe(&self.shared.config)
    }
}

fn describe(config: &tokio_postgres::Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            #[cfg(unix)]
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "{}:{port}/{}",
        hosts.join(","),
        config.get_dbname().unwrap_or("")
    )
}

impl Shared {
    async fn client(&self) -> StoreResult<deadpool_postgres::Object> {
        self.pool.get().await.map_err(pool_error)
    }

    /// The next link id of this instance's segment, reserving a new block when it is spent.
    /// Reserved on a connection of its own, outside the caller's transaction, so that a
    /// rolled-back create never hands out a block twice.
    async fn next_link_id(&self) -> StoreResult<u64> {
        if let Some(id) = self.take_id() {
            return Ok(id);
        }
        let _reserving = self.reserving.lock().await;
        // Another create may have reserved a block while we waited.
        if let Some(id) = self.take_id() {
            return Ok(id);
        }
        let client = self.client().await?;
        let end: i64 = client
            .row(
                "UPDATE id_blocks SET next = next + $1 WHERE name = 'link' RETURNING next",
                &[&ID_BLOCK],
            )
            .await
            .map_err(db_error)?
            .get(0);
        let start = end - ID_BLOCK;
        let mut ids = self.ids.lock();
        *ids = (start + 1, end);
        Ok(rust_ms(start))
    }

    fn take_id(&self) -> Option<u64> {
        let mut ids = self.ids.lock();
        (ids.0 < ids.1).then(|| {
            let id = ids.0;
            ids.0 += 1;
            rust_ms(id)
        })
    }
}

/// Holds a session advisory lock: dropping it closes the connection, which releases it.
struct HeldLock(Option<deadpool_postgres::Object>);

impl Drop for HeldLock {
    fn drop(&mut self) {
        if let Some(object) = self.0.take() {
            // Out of the pool and closed, rather than returned holding the lock.
            drop(deadpool_postgres::Object::take(object));
        }
    }
}

impl MetaStore for PgStore {
    fn meta_get(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        self.block(async {
            let client = self.shared.client().await?;
            let row = client
                .row_opt("SELECT value FROM meta WHERE key = $1", &[&key])
                .await
                .map_err(db_error)?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    fn meta_init(&self, key: &str, value: &[u8]) -> StoreResult<Vec<u8>> {
        self.block(async {
            let client = self.shared.client().await?;
            client
                .exec(
                    "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                    &[&key, &value],
                )
                .await
                .map_err(db_error)?;
            let row = client
                .row("SELECT value FROM meta WHERE key = $1", &[&key])
                .await
                .map_err(db_error)?;
            Ok(row.get(0))
        })
    }

    fn meta_replace(&self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.block(async {
            let client = self.shared.client().await?;
            client
                .exec(
                    "INSERT INTO meta (key, value) VALUES ($1, $2)
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    &[&key, &value],
                )
                .await
                .map_err(db_error)?;
            Ok(())
        })
    }
}

impl StoreOps for PgStore {
    /// Nothing is kept in memory between writes.
    fn checkpoint(&self) -> StoreResult<()> {
        Ok(())
    }

    /// Every write is committed before it returns.
    fn sync(&self) -> StoreResult<()> {
        Ok(())
    }

    fn ping(&self) -> StoreResult<()> {
        self.block(async {
            let client = self.shared.client().await?;
            client.exec("SELECT 1", &[]).await.map_err(db_error)?;
            Ok(())
        })
    }

    /// The server recovers from a full disk by itself; a refused write fails alone.
    fn write_fault(&self) -> Option<StorageFault> {
        None
    }

    /// The server groups commits itself; there is nothing of ours to report.
    fn commit_stats(&self) -> CommitStats {
        CommitStats::default()
    }

    fn cluster(&self) -> Option<&dyn Cluster> {
        Some(self)
    }

    fn close(&self) -> StoreResult<()> {
        self.shared.pool.close();
        Ok(())
    }
}

impl Cluster for PgStore {
    fn job_lock(&self, name: &str) -> StoreResult<JobLock> {
        let name = format!("vshortlink:job:{name}");
        self.block(async {
            let client = self.shared.client().await?;
            client
                .exec("SELECT pg_advisory_lock(hashtextextended($1, 0))", &[&name])
                .await
                .map_err(db_error)?;
            Ok(JobLock::holding(Box::new(HeldLock(Some(client)))))
        })
    }

    fn records(&self) -> &dyn SharedRecords {
        self
    }

    fn watch(&self, on_change: ChangeHandler) {
        if let Some(runtime) = &self.runtime {
            runtime.spawn(watch::listen(self.shared.config.clone(), on_change));
        }
    }
}
