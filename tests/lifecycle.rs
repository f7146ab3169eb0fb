//! The life of links and codes with a manual clock: expiry at redirect time, the
//! maintenance job, recycling with cooldown, retiring, idempotence.

use std::sync::Arc;

#[path = "common/postgres.rs"]
mod pg;

use pg::test_store;

use vshortlink::clock::{Clock, ManualClock};
use vshortlink::config::Config;
use vshortlink::jobs::lifecycle::{Lifecycle, MaintenanceReport};
use vshortlink::links::{CreateLink, Links, Resolution};
use vshortlink::model::{LinkStatus, StoreError};
use vshortlink::store::{CodeChoice, NewLink, Store};

const DAY: u64 = 86_400_000;
const T0: u64 = 1_800_000_000_000;

struct World {
    _dir: tempfile::TempDir,
    /// Runs the visit writer and pool refills that `build` starts.
    _runtime: tokio::runtime::Runtime,
    clock: Arc<ManualClock>,
    store: Arc<dyn Store>,
    links: Arc<Links>,
    job: Arc<Lifecycle>,
}

fn world(overlay: &str) -> World {
    let dir = tempfile::tempdir().unwrap();
    // The generated admin key goes into the temp dir, not the working directory.
    let overlay = format!("{overlay}\n[storage]\npath = {:?}\n", dir.path());
    let config = Arc::new(Config::from_toml(&overlay).unwrap());
    let store = test_store(dir.path());
    let clock = Arc::new(ManualClock::new(T0));
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let app = runtime
        .block_on(vshortlink::build(config, store.clone(), dyn_clock))
        .unwrap();
    let links = app.state.links.clone();
    let job = app.state.lifecycle.clone();
    World {
        _dir: dir,
        _runtime: runtime,
        clock,
        store,
        links,
        job,
    }
}

fn create(w: &World, body: serde_json::Value) -> vshortlink::model::Link {
    let req: CreateLink = serde_json::from_value(body).unwrap();
    w.links.create(req).unwrap().0
}

fn take(w: &World, length: u8, i: u64) -> Result<String, StoreError> {
    let new = NewLink {
        code: CodeChoice::Pool(length),
        url: format!("https://example.com/take/{i}"),
        space: "default".into(),
        expires_at: None,
        title: None,
        tags: vec![],
        options: None,
        domain: 0,
        dedup: false,
        now: w.clock.now(),
    };
    w.store.create_link(&new).map(|c| c.link().code.clone())
}

fn counts(r: MaintenanceReport) -> (u64, u64, u64) {
    (r.expired, r.recycled, r.retired)
}

#[test]
fn expiry_stops_redirects_at_once_and_the_job_marks_the_link() {
    let w = world("");
    let link = create(
        &w,
        serde_json::json!({"url": "https://example.com/", "ttl": 60}),
    );
    assert!(matches!(
        w.links.resolve(&link.code).unwrap(),
        Resolution::Found { .. }
    ));
    w.clock.advance(60_000);
    // Cached, in the active mapping, not yet marked: still refused.
    assert!(matches!(
        w.links.resolve(&link.code).unwrap(),
        Resolution::Gone { fallback: None }
    ));
    assert_eq!(
        w.store.link_by_code(&link.code).unwrap().unwrap().status,
        LinkStatus::Active
    );

    let report = w.job.run().unwrap();
    assert_eq!(counts(report), (1, 0, 0));
    let after = w.store.link_by_code(&link.code).unwrap().unwrap();
    assert_eq!(after.status, LinkStatus::Expired);
    assert!(
        w.store.resolve(&link.code).unwrap().is_none(),
        "out of the active mapping"
    );
    assert!(matches!(
        w.links.resolve(&link.code).unwrap(),
        Resolution::Gone { fallback: None }
    ));
    let totals = w.store.link_counts().unwrap();
    assert_eq!((totals.active, totals.expired), (0, 1));
    // A second run finds nothing to do.
    assert_eq!(counts(w.job.run().unwrap()), (0, 0, 0));
    // Dedup no longer returns the expired link.
    let again = create(
        &w,
        serde_json::json!({"url": "https://example.com/", "ttl": 60}),
    );
    assert_ne!(again.code, link.code);
}

#[test]
fn recycled_codes_wait_out_their_cooldown_then_come_back() {
    let w = world(
        "[tiers.5]\nbatch = 10\nlow_water = 0\nttl = \"1d\"\ncooldown = \"30d\"\n\
         [lifecycle]\nrecycle_after = \"30d\"\n",
    );
    let link = create(
        &w,
        serde_json::json!({"url": "https://example.com/r", "length": 5}),
    );
    w.clock.advance(DAY);
    assert_eq!(counts(w.job.run().unwrap()), (1, 0, 0));
    // Not yet: recycle_after counts from the expiry.
    w.clock.advance(29 * DAY);
    assert_eq!(counts(w.job.run().unwrap()), (0, 0, 0));
    w.clock.advance(DAY + 1);
    assert_eq!(counts(w.job.run().unwrap()), (0, 1, 0));
    let archived = w.store.link_by_id(link.id).unwrap().unwrap();
    assert_eq!(archived.status, LinkStatus::Archived, "kept by id");
    assert!(
        w.store.link_by_code(&link.code).unwrap().is_none(),
        "the code is free"
    );
    let pool = w.store.pool_counts(5, w.clock.now()).unwrap();
    assert_eq!(
        (pool.available, pool.cooling, pool.recycled_total),
        (9, 1, 1)
    );
    assert_eq!(w.store.link_counts().unwrap().archived, 1);

    // During the cooldown, every other code goes first and then the pool is empty.
    let mut taken = Vec::new();
    for i in 0.. {
        match take(&w, 5, i) {
            Ok(code) => taken.push(code),
            Err(StoreError::PoolEmpty(5)) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(taken.len(), 9);
    assert!(!taken.contains(&link.code));
    // After it, the recycled code is handed out, to a new link with a new id.
    w.clock.advance(30 * DAY);
    assert_eq!(take(&w, 5, 99).unwrap(), link.code);
    let reborn = w.store.link_by_code(&link.code).unwrap().unwrap();
    assert_ne!(reborn.id, link.id);
    assert_eq!(
        w.store.link_by_id(link.id).unwrap().unwrap().status,
        LinkStatus::Archived
    );
}

#[test]
fn tiers_that_do_not_recycle_retire_their_codes() {
    let w = world("[lifecycle]\nrecycle_after = \"1d\"\n");
    let six = create(&w, serde_json::json!({"url": "https://example.com/6"}));
    let custom = create(
        &w,
        serde_json::json!({"url": "https://example.com/c", "code": "ab", "ttl": 10}),
    );
    w.clock.advance(8 * DAY);
    // Both expire; the custom one ended 8 days ago and is retired in the same run, the
    // generated one (7-day default) ended a day ago, exactly recycle_after: not yet.
    assert_eq!(counts(w.job.run().unwrap()), (2, 0, 1));
    w.clock.advance(1);
    assert_eq!(counts(w.job.run().unwrap()), (0, 0, 1));
    assert_eq!(counts(w.job.run().unwrap()), (0, 0, 0), "idempotent");
    for code in [&six.code, &custom.code] {
        assert!(!w.store.in_pool(code).unwrap());
        assert_eq!(
            w.store.link_by_code(code).unwrap().unwrap().status,
            LinkStatus::Expired
        );
    }
    let reuse: CreateLink =
        serde_json::from_value(serde_json::json!({"url": "https://e.com/", "code": "ab"})).unwrap();
    assert!(matches!(
        w.links.create(reuse),
        Err(vshortlink::links::LinkError::CodeTaken(_))
    ));
}

#[test]
fn deleted_links_recycle_from_their_deletion_time() {
    let w = world(
        "[tiers.4]\nbatch = 10\nlow_water = 0\ncooldown = \"1d\"\n[lifecycle]\nrecycle_after = \"10d\"\n",
    );
    let link = create(
        &w,
        serde_json::json!({"url": "https://example.com/d", "length": 4}),
    );
    w.clock.advance(5 * DAY);
    w.links.delete(&link.code).unwrap();
    w.clock.advance(10 * DAY - 1);
    assert_eq!(counts(w.job.run().unwrap()), (0, 0, 0));
    w.clock.advance(2);
    assert_eq!(counts(w.job.run().unwrap()), (0, 1, 0));
    assert!(w.store.in_pool(&link.code).unwrap());
}

#[test]
fn the_job_works_in_chunks_over_many_links() {
    let w = world("[tiers.6]\nbatch = 1000\nlow_water = 0\n");
    for i in 0..1200 {
        create(
            &w,
            serde_json::json!({"url": format!("https://example.com/{i}"), "ttl": 10}),
        );
    }
    w.clock.advance(11_000);
    let report = w.job.run().unwrap();
    assert_eq!(report.expired, 1200);
    assert_eq!(w.store.link_counts().unwrap().expired, 1200);
    assert_eq!(w.job.run().unwrap().expired, 0);
}
