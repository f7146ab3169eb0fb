//! The core against a real sled store in a temp directory: pools and strategies end to end,
//! concurrent takes, the code filter's persistence, lifecycle transitions in the store, and a
//! SIGKILL during concurrent creates.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vshortlink::clock::{Clock, ManualClock, SystemClock};
use vshortlink::codes::{decode, Space};
use vshortlink::config::Config;
use vshortlink::model::{LinkPatch, LinkStatus, StoreError};
use vshortlink::pools::{Pools, StrategyState};
use vshortlink::store::prelude::*;
use vshortlink::store::sled::{SledStore, StoreOptions};
use vshortlink::store::{CodeChoice, Created, NewLink, Store};

fn open(dir: &Path) -> Arc<SledStore> {
    SledStore::open(&StoreOptions::new(dir)).expect("open store")
}

fn pools(store: &Arc<SledStore>, overlay: &str) -> Pools {
    let config = Config::from_toml(overlay).expect("config");
    let store: Arc<dyn Store> = store.clone();
    Pools::new(store, Arc::new(SystemClock), &config).expect("pools")
}

fn new_link(length: u8, url: &str, now: u64) -> NewLink {
    NewLink {
        code: CodeChoice::Pool(length),
        url: url.to_string(),
        space: "default".into(),
        expires_at: None,
        title: None,
        tags: vec![],
        options: None,
        domain: 0,
        dedup: true,
        now,
    }
}

fn custom(code: &str, url: &str, now: u64) -> NewLink {
    NewLink {
        code: CodeChoice::Custom(code.to_string()),
        dedup: false,
        ..new_link(0, url, now)
    }
}

fn now() -> u64 {
    SystemClock.now()
}

const SMALL_STEP: &str =
    "[tiers.2]\nstrategy = \"step\"\nbatch = 100\nlow_water = 0\nttl = \"permanent\"\n";

#[test]
fn step_tier_pools_every_code_once_then_reports_exhausted() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let pools = pools(&store, SMALL_STEP);
    let space = Space::for_length(2).unwrap();
    let mut total = 0;
    let mut rounds = 0;
    loop {
        let added = pools.refill(2, 100).unwrap();
        if added == 0 {
            break;
        }
        total += added;
        rounds += 1;
        assert!(rounds < 100, "step never exhausted");
    }
    // "ui" is a reserved word (in any case: ui, uI, Ui, UI) and never pooled.
    let reserved = 4;
    assert_eq!(total, space.size() - reserved);
    let status = pools.status(2).unwrap().unwrap();
    assert!(status.exhausted);
    assert_eq!(status.counts.available, space.size() - reserved);
    assert_eq!(status.counts.generated_total, space.size() - reserved);
    match status.state {
        StrategyState::Step(s) => {
            assert_eq!(s.batch_index, 38, "ceil(3782 / 100) batches");
            assert!(s.exhausted);
        }
        other => panic!("unexpected state {other:?}"),
    }
    let pooled = store.pool_peek(2, 10_000).unwrap();
    let distinct: HashSet<_> = pooled.iter().map(|(_, c)| decode(c).unwrap()).collect();
    assert_eq!(distinct.len() as u64, space.size() - reserved);
    assert!(distinct.iter().all(|n| space.contains(*n)));
    assert!(!pooled
        .iter()
        .any(|(_, c)| vshortlink::codes::is_reserved(c)));
}

#[test]
fn step_state_survives_restart_without_repeating_codes() {
    let dir = tempfile::tempdir().unwrap();
    let first: HashSet<String> = {
        let store = open(dir.path());
        let pools = pools(&store, SMALL_STEP);
        pools.refill(2, 300).unwrap();
        let codes = store.pool_peek(2, 10_000).unwrap();
        store.close().unwrap();
        codes.into_iter().map(|(_, c)| c).collect()
    };
    let store = open(dir.path());
    let pools = pools(&store, SMALL_STEP);
    while pools.refill(2, 1000).unwrap() > 0 {}
    let all = store.pool_peek(2, 10_000).unwrap();
    assert_eq!(all.len() as u64, Space::for_length(2).unwrap().size() - 4);
    assert!(first.iter().all(|c| all.iter().any(|(_, a)| a == c)));
}

const PERMUTE_2: &str =
    "[tiers.2]\nstrategy = \"permute\"\nbatch = 500\nlow_water = 0\nttl = \"permanent\"\n";

#[test]
fn permute_tier_is_a_bijection_and_keys_differ_between_data_dirs() {
    let mut orders = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let pools = pools(&store, PERMUTE_2);
        let mut order = Vec::new();
        // Take in ZSet order batch by batch: every batch has one score, so collect the
        // batches' codes as the strategy produced them.
        while pools.refill(2, 500).unwrap() > 0 {}
        for (_, code) in store.pool_peek(2, 10_000).unwrap() {
            order.push(code);
        }
        let space = Space::for_length(2).unwrap();
        let distinct: HashSet<_> = order.iter().collect();
        assert_eq!(distinct.len(), order.len());
        assert_eq!(
            order.len() as u64,
            space.size() - 4,
            "all but the reserved `ui` (any case)"
        );
        let status = pools.status(2).unwrap().unwrap();
        assert!(status.exhausted);
        // The key is kept: reopening gives the same permuter.
        let key_before = store.meta_get("permute_key/2").unwrap().unwrap();
        store.close().unwrap();
        drop(pools);
        drop(store);
        let store = open(dir.path());
        assert_eq!(
            store.meta_get("permute_key/2").unwrap().unwrap(),
            key_before
        );
        orders.push(key_before);
    }
    assert_ne!(orders[0], orders[1], "each data dir generates its own key");
}

#[test]
fn random_never_pools_a_code_twice_and_filter_survives_restart_and_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let overlay = "[tiers.6]\nstrategy = \"random\"\nbatch = 1000\nlow_water = 0\nttl = \"7d\"\n";
    let custom_code = "abcdef";
    {
        let store = open(dir.path());
        let pools = pools(&store, overlay);
        // A custom code of the same length must never be generated afterwards.
        store
            .create_link(&custom(custom_code, "https://example.com/c", now()))
            .unwrap();
        let mut total = 0;
        for _ in 0..100 {
            total += pools.refill(6, 1000).unwrap();
        }
        assert_eq!(total, 100_000);
        let counts = store.pool_counts(6, now()).unwrap();
        // Pool keys are unique per code, so the count is the number of distinct codes.
        assert_eq!(counts.available, 100_000);
        assert_eq!(counts.generated_total, 100_000);
        assert!(!store.in_pool(custom_code).unwrap());
        store.close().unwrap();
    }
    let pooled: Vec<String> = {
        let store = open(dir.path());
        assert!(
            store.open_report().filter_rebuilt.is_none(),
            "a cleanly saved filter is reused: {:?}",
            store.open_report()
        );
        let pooled: Vec<String> = store
            .pool_peek(6, 200_000)
            .unwrap()
            .into_iter()
            .map(|(_, c)| c)
            .collect();
        assert_eq!(pooled.len(), 100_000);
        assert!(pooled.iter().all(|c| store.may_exist(c)));
        assert!(store.may_exist(custom_code));
        store.close().unwrap();
        pooled
    };
    std::fs::remove_file(dir.path().join("codes.bloom")).unwrap();
    let store = open(dir.path());
    let reason = store.open_report().filter_rebuilt.clone();
    assert_eq!(reason.as_deref(), Some("missing"));
    assert!(pooled.iter().all(|c| store.may_exist(c)));
    assert!(store.may_exist(custom_code));
    // Never-issued codes are (almost all) rejected without a tree read.
    let unknown = (0..1000u64)
        .map(|i| vshortlink::codes::encode(916_132_832 + i * 7919))
        .filter(|c| !pooled.contains(c) && c != custom_code)
        .filter(|c| store.may_exist(c))
        .count();
    assert!(unknown < 50, "{unknown} false positives out of 1000");
}

#[test]
fn stale_filter_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("saved.bloom");
    {
        let store = open(dir.path());
        store
            .create_link(&custom("first", "https://example.com/1", now()))
            .unwrap();
        store.close().unwrap();
        std::fs::copy(dir.path().join("codes.bloom"), &saved).unwrap();
    }
    {
        let store = open(dir.path());
        store
            .create_link(&custom("second", "https://example.com/2", now()))
            .unwrap();
        store.close().unwrap();
    }
    // Put back the older file, as if the process had died before saving the newer one.
    std::fs::copy(&saved, dir.path().join("codes.bloom")).unwrap();
    let store = open(dir.path());
    let reason = store
        .open_report()
        .filter_rebuilt
        .clone()
        .unwrap_or_default();
    assert!(reason.starts_with("stale"), "{reason}");
    assert!(store.may_exist("first") && store.may_exist("second"));
}

#[test]
fn sixty_four_threads_take_distinct_codes_and_lose_none() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let overlay = "[tiers.5]\nstrategy = \"random\"\nbatch = 2000\nlow_water = 0\nttl = \"365d\"\n";
    let pools = pools(&store, overlay);
    pools.refill(5, 2000).unwrap();
    let t = now();
    let before = store.pool_counts(5, t).unwrap().available;
    assert_eq!(before, 2000);
    let handles: Vec<_> = (0..64)
        .map(|thread| {
            let store = store.clone();
            std::thread::spawn(move || {
                (0..20)
                    .map(|i| {
                        let url = format!("https://example.com/{thread}/{i}");
                        match store.create_link(&new_link(5, &url, t)).unwrap() {
                            Created::New(link) => link.code,
                            Created::Existing(_) => panic!("distinct URLs never dedup"),
                        }
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let taken: Vec<String> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let distinct: HashSet<_> = taken.iter().collect();
    assert_eq!(taken.len(), 64 * 20);
    assert_eq!(distinct.len(), taken.len(), "a code was handed out twice");
    let after = store.pool_counts(5, t).unwrap().available;
    assert_eq!(after + taken.len() as u64, before);
    for code in &taken {
        assert!(!store.in_pool(code).unwrap());
        assert!(store.resolve(code).unwrap().is_some());
    }
    assert_eq!(store.link_counts().unwrap().active, taken.len() as u64);
}

/// Pooled creates, custom creates of codes sitting in the pool, and refills, all at once: the
/// pool's membership (held in memory, under a lock each of these writes holds or follows)
/// never lets a code go to two links or stay pooled once owned.
#[test]
fn pooled_and_custom_creates_race_refills_without_giving_a_code_twice() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let overlay = "[tiers.5]\nstrategy = \"random\"\nbatch = 500\nlow_water = 0\nttl = \"365d\"\n";
    let pools = Arc::new(pools(&store, overlay));
    pools.refill(5, 1000).unwrap();
    // Each create reads the clock: the refill's codes are due from the moment it adds them.
    let pooled: Vec<_> = (0..8)
        .map(|thread| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut codes = Vec::new();
                for i in 0..100 {
                    let url = format!("https://pooled.example/{thread}/{i}");
                    if let Created::New(link) =
                        store.create_link(&new_link(5, &url, now())).unwrap()
                    {
                        codes.push(link.code);
                    }
                }
                codes
            })
        })
        .collect();
    let custom: Vec<_> = (0..4)
        .map(|thread| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut codes = Vec::new();
                for i in 0..100 {
                    // Half of them near the head, where the committer may take the code
                    // first; half deep in the pool, where nothing else would take it.
                    let head = store.pool_peek(5, 600).unwrap();
                    let at = if i % 2 == 0 {
                        (thread + i) % 8
                    } else {
                        head.len().saturating_sub(1 + thread + i)
                    };
                    let Some((_, code)) = head.get(at) else {
                        continue;
                    };
                    let url = format!("https://custom.example/{thread}/{i}");
                    match store.create_link(&custom(code, &url, now())) {
                        Ok(created) => codes.push(created.link().code.clone()),
                        Err(StoreError::CodeTaken(_)) => {}
                        Err(e) => panic!("custom create of `{code}`: {e:?}"),
                    }
                }
                codes
            })
        })
        .collect();
    let refill = {
        let pools = pools.clone();
        std::thread::spawn(move || {
            for _ in 0..10 {
                pools.refill(5, 200).unwrap();
            }
        })
    };
    let mut taken: Vec<String> = pooled
        .into_iter()
        .chain(custom)
        .flat_map(|h| h.join().unwrap())
        .collect();
    refill.join().unwrap();
    let count = taken.len();
    taken.sort();
    taken.dedup();
    assert_eq!(taken.len(), count, "a code was handed out twice");
    for code in &taken {
        assert!(
            !store.in_pool(code).unwrap(),
            "`{code}` is owned and still pooled"
        );
    }
    assert_eq!(store.link_counts().unwrap().active, count as u64);
    let report = store.check().unwrap();
    assert!(report.faults.is_empty(), "{:?}", report.faults);
}

/// Concurrent creates of one URL are applied in groups (one transaction for many creates):
/// a group that holds the same URL twice must still make one link, not two.
#[test]
fn concurrent_creates_of_one_url_dedup_to_one_link() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let overlay = "[tiers.5]\nstrategy = \"random\"\nbatch = 2000\nlow_water = 0\nttl = \"365d\"\n";
    let pools = pools(&store, overlay);
    pools.refill(5, 2000).unwrap();
    let t = now();
    let handles: Vec<_> = (0..32)
        .map(|_| {
            let store = store.clone();
            std::thread::spawn(move || {
                (0..10)
                    .map(|i| {
                        // Every thread asks for the same ten URLs.
                        let url = format!("https://example.com/same/{i}");
                        store.create_link(&new_link(5, &url, t)).unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let all: Vec<Created> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let new = all.iter().filter(|c| matches!(c, Created::New(_))).count();
    assert_eq!(new, 10, "one new link per URL");
    let ids: HashSet<u64> = all.iter().map(|c| c.link().id).collect();
    assert_eq!(ids.len(), 10);
    assert_eq!(store.link_counts().unwrap().active, 10);
    assert_eq!(store.pool_counts(5, t).unwrap().available, 2000 - 10);
}

/// Creates a custom link on the code at the head of pool 4 and checks the code left the pool.
fn custom_create_takes_the_pool_head(store: &SledStore, url: &str, t: u64) {
    let (_, pooled) = store.pool_peek(4, 1).unwrap().remove(0);
    assert!(store.in_pool(&pooled).unwrap());
    let before = store.pool_counts(4, t).unwrap().available;
    store.create_link(&custom(&pooled, url, t)).unwrap();
    assert!(!store.in_pool(&pooled).unwrap());
    assert_eq!(store.pool_counts(4, t).unwrap().available, before - 1);
}

#[test]
fn dedup_custom_codes_and_pool_membership() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let pools = pools(&store, "[tiers.4]\nlow_water = 0\n");
    let t = now();
    let a = pools
        .create(&new_link(4, "https://example.com/a", t))
        .unwrap();
    let Created::New(a) = a else {
        panic!("first create is new")
    };
    assert_eq!(a.code.len(), 4);
    // Same URL, space and length: the existing link, no code taken.
    let before = store.pool_counts(4, t).unwrap().available;
    let again = pools
        .create(&new_link(4, "https://example.com/a", t))
        .unwrap();
    assert_eq!(again, Created::Existing(a.clone()));
    assert_eq!(store.pool_counts(4, t).unwrap().available, before);
    // Another space or length is another link.
    let mut other_space = new_link(4, "https://example.com/a", t);
    other_space.space = "sports".into();
    assert!(matches!(
        pools.create(&other_space).unwrap(),
        Created::New(_)
    ));
    // A custom code sitting in the pool is taken out of it.
    custom_create_takes_the_pool_head(&store, "https://example.com/c", t);
    // A code in use is taken.
    match store.create_link(&custom(&a.code, "https://example.com/x", t)) {
        Err(StoreError::CodeTaken(code)) => assert_eq!(code, a.code),
        other => panic!("expected CodeTaken, got {other:?}"),
    }
    // Custom links are not dedup targets.
    let c1 = store
        .create_link(&custom("mine1", "https://example.com/same", t))
        .unwrap();
    let c2 = store
        .create_link(&custom("mine2", "https://example.com/same", t))
        .unwrap();
    assert_ne!(c1.link().id, c2.link().id);
    assert!(
        !store.in_pool(&a.code).unwrap(),
        "a taken head left the pool"
    );

    // Membership is rebuilt from the pool at open: a pooled code is still found and taken out.
    drop(pools);
    store.close().unwrap();
    drop(store);
    let store = open(dir.path());
    custom_create_takes_the_pool_head(&store, "https://example.com/d", t);
    let report = store.check().unwrap();
    assert!(report.faults.is_empty(), "{:?}", report.faults);
}

#[test]
fn update_delete_expire_and_recycle_move_a_code_through_its_life() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let clock = ManualClock::new(1_700_000_000_000);
    let t0 = clock.now();
    let mut new = custom("life", "https://example.com/old", t0);
    new.expires_at = Some(t0 + 1000);
    let link = store.create_link(&new).unwrap().link().clone();

    let patched = store
        .update_link(
            "life",
            &LinkPatch {
                url: Some("https://example.com/new".into()),
                ..Default::default()
            },
            t0 + 1,
        )
        .unwrap();
    assert_eq!(patched.url, "https://example.com/new");
    assert_eq!(
        store.resolve("life").unwrap().unwrap().url,
        "https://example.com/new"
    );

    clock.advance(2000);
    let due = store.due_for_expiry(clock.now(), 100).unwrap();
    assert_eq!(due.iter().map(|l| l.id).collect::<Vec<_>>(), [link.id]);
    let expired = store.expire_link(link.id, clock.now()).unwrap().unwrap();
    assert_eq!(expired.status, LinkStatus::Expired);
    assert!(store.resolve("life").unwrap().is_none());
    assert!(
        store.expire_link(link.id, clock.now()).unwrap().is_none(),
        "idempotent"
    );
    assert!(matches!(
        store.update_link("life", &LinkPatch::default(), clock.now()),
        Err(StoreError::WrongStatus(LinkStatus::Expired))
    ));

    let recyclable = store.due_for_recycling(t0 + 1001, 10).unwrap();
    assert_eq!(recyclable.len(), 1);
    let cooldown_end = clock.now() + 30_000;
    store.recycle_link(link.id, cooldown_end).unwrap().unwrap();
    let archived = store.link_by_id(link.id).unwrap().unwrap();
    assert_eq!(archived.status, LinkStatus::Archived);
    assert!(store.link_by_code("life").unwrap().is_none());
    let counts = store.pool_counts(4, clock.now()).unwrap();
    assert_eq!(
        (counts.available, counts.cooling, counts.recycled_total),
        (0, 1, 1)
    );
    // Not handed out before the cooldown ends...
    assert!(matches!(
        store.create_link(&new_link(4, "https://example.com/n", clock.now())),
        Err(StoreError::PoolEmpty(4))
    ));
    // ...then it is.
    clock.set(cooldown_end);
    let reused = store
        .create_link(&new_link(4, "https://example.com/n", clock.now()))
        .unwrap();
    assert_eq!(reused.link().code, "life");
    assert_ne!(reused.link().id, link.id, "ids are never reused");
    let totals = store.link_counts().unwrap();
    assert_eq!((totals.active, totals.archived), (1, 1));

    let deleted = store.delete_link("life", clock.now()).unwrap();
    assert_eq!(deleted.status, LinkStatus::Deleted);
    assert!(store.resolve("life").unwrap().is_none());
    assert!(matches!(
        store.delete_link("life", clock.now()),
        Err(StoreError::WrongStatus(LinkStatus::Deleted))
    ));
    assert!(store.retire_link(deleted.id).unwrap());
    assert!(store.due_for_recycling(u64::MAX, 10).unwrap().is_empty());
}

/// The store's sled database, opened directly once the store's handle has let go of it (its
/// background threads release the lock a moment after the last handle is dropped).
fn raw_db(dir: &Path) -> sled::Db {
    let started = Instant::now();
    loop {
        match sled::open(dir.join("db")) {
            Ok(db) => return db,
            Err(e) if started.elapsed() > Duration::from_secs(5) => panic!("open sled: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Stores written before an active link's redirect entry moved into `codes` kept it in an
/// `active` tree, with the id alone in `codes`. Opening one moves the entries over and drops
/// the old tree; redirects, reads and `check` then work as on a new store.
#[test]
fn a_store_with_the_old_active_tree_is_moved_into_the_code_index_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = now();
    {
        let store = open(dir.path());
        for (code, url) in [
            ("keep", "https://example.com/keep"),
            ("gone", "https://example.com/gone"),
        ] {
            store.create_link(&custom(code, url, t0)).unwrap();
        }
        store.delete_link("gone", t0).unwrap();
        store.close().unwrap();
    }
    // Write the old layout by hand: each active entry in `active`, the id alone in `codes`.
    {
        let db = raw_db(dir.path());
        let (codes, active) = (
            db.open_tree("codes").unwrap(),
            db.open_tree("active").unwrap(),
        );
        let mut moved = 0;
        for item in codes.iter() {
            let (code, value) = item.unwrap();
            if value.len() != 8 {
                let entry: vshortlink::store::ActiveEntry = rmp_serde::from_slice(&value).unwrap();
                active.insert(&code, value).unwrap();
                codes.insert(&code, &entry.id.to_be_bytes()[..]).unwrap();
                moved += 1;
            }
        }
        assert_eq!(moved, 1, "one active link");
        // Pool membership was a tree of its own too.
        db.open_tree("pool_members")
            .unwrap()
            .insert("zzzz", &0u64.to_be_bytes()[..])
            .unwrap();
        assert!(codes.get("keep").unwrap().unwrap().len() == 8);
        db.flush().unwrap();
    }
    let store = open(dir.path());
    assert_eq!(
        store.resolve("keep").unwrap().unwrap().url,
        "https://example.com/keep"
    );
    assert!(
        store.resolve("gone").unwrap().is_none(),
        "deleted: no redirect"
    );
    assert_eq!(
        store.link_by_code("gone").unwrap().unwrap().status,
        LinkStatus::Deleted
    );
    let report = store.check().unwrap();
    assert!(report.faults.is_empty(), "{:?}", report.faults);
    store.close().unwrap();
    drop(store);
    let db = raw_db(dir.path());
    assert!(
        !db.tree_names().iter().any(|n| n.as_ref() == b"active"),
        "the old tree is dropped"
    );
    assert!(!db
        .tree_names()
        .iter()
        .any(|n| n.as_ref() == b"pool_members"));
}

// ---- crash safety ----

/// `examples/crash_child.rs`, built by `cargo test` beside this test binary: 32 threads create
/// links forever and print each one after its create returned.
fn crash_child_exe() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/core-<hash> → target/<profile>/examples/crash_child
    let path = exe
        .parent()
        .and_then(Path::parent)
        .map(|p| p.join("examples").join("crash_child"))
        .expect("target dir");
    assert!(
        path.is_file(),
        "{} is missing: `cargo test` builds it (or `cargo build --example crash_child`)",
        path.display()
    );
    path
}

#[test]
fn sigkill_during_concurrent_creates_loses_no_acknowledged_link() {
    let dir = tempfile::tempdir().unwrap();
    let exe = crash_child_exe();
    let mut acked: Vec<(String, String)> = Vec::new();
    for round in 0..3 {
        let mut child = Command::new(&exe)
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .filter_map(|l| {
                    let mut parts = l.strip_prefix("ACK ")?.split(' ');
                    Some((parts.next()?.to_string(), parts.next()?.to_string()))
                })
                .collect::<Vec<_>>()
        });
        // Let it write for a while (longer each round), then kill it mid-stream.
        std::thread::sleep(Duration::from_millis(700 + 400 * round));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let this_round = reader.join().unwrap();
        assert!(
            !this_round.is_empty(),
            "round {round}: the child acknowledged nothing"
        );
        acked.extend(this_round);

        let started = Instant::now();
        let store = open(dir.path());
        let mut seen = HashSet::new();
        for (code, url) in &acked {
            let link = store
                .link_by_code(code)
                .unwrap()
                .unwrap_or_else(|| panic!("acknowledged {code} lost after SIGKILL"));
            assert_eq!(&link.url, url);
            assert_eq!(store.resolve(code).unwrap().unwrap().url, *url);
            assert!(store.may_exist(code));
            assert!(
                !store.in_pool(code).unwrap(),
                "{code} is both linked and pooled"
            );
            assert!(seen.insert(code.clone()), "{code} acknowledged twice");
        }
        assert!(started.elapsed() < Duration::from_secs(30));
        store.close().unwrap();
    }
}
