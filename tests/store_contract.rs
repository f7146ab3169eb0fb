//! The store contract: what every [`Store`] backend must do, as one suite of cases run against
//! each backend (sled, and PostgreSQL on a real server the suite starts itself; a backend adds
//! one `backend!` line to the `contract!` macro). The cases speak only the trait, so a backend
//! that passes them behaves the same to the domain services.
#![cfg(feature = "postgres")]

#[path = "common/postgres.rs"]
mod pg;

use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vshortlink::model::gates::{FieldKind, FormField};
use vshortlink::model::options::{Conditions, Os, Rotation, Rule, Target};
use vshortlink::model::{
    client_hash_of, CheckRecord, DeliveryAttempt, DeliveryOutcome, DeliveryRecord, Dimension,
    EndedBy, HourCount, InApp, Lead, LeadForm, NewOutboxItem, OptionsPatch, OutboxItem, Review,
    SocialPreview, Trigger, Verdict, DELIVERY_LOG_KEEP,
};
use vshortlink::model::{AccountRecord, AccountWrite, AuditEntry, AuditQuery, Team};
use vshortlink::model::{
    CapSlot, ClaimOutcome, Link, LinkOptions, LinkPatch, LinkQuery, LinkStatus, NewVisit,
    StoreError, Visit, VisitClaim,
};
use vshortlink::store::postgres::{PgOptions, PgStore};
use vshortlink::store::sled::{SledStore, StoreOptions};
use vshortlink::store::{
    CodeChoice, Created, DomainAdded, Imported, NewLink, PoolAdded, PoolBatch, Store, StoreChange,
};

const T0: u64 = 1_800_000_000_000;
const DAY: u64 = 86_400_000;
const HOUR: u64 = 3_600_000;

/// A fresh store of one backend, in its own temp dir (kept alive beside it).
type Make = fn(&tempfile::TempDir) -> Arc<dyn Store>;

fn sled(dir: &tempfile::TempDir) -> Option<Arc<dyn Store>> {
    Some(SledStore::open(&StoreOptions::new(dir.path())).expect("open sled"))
}

/// The database of each PostgreSQL store made here, by the temp dir it was made for, so that
/// a case can open a second instance on it ([`another_instance`]).
static DATABASES: Mutex<Vec<(PathBuf, String)>> = Mutex::new(Vec::new());

/// A store on a fresh database of the test server; `None` where PostgreSQL is not installed.
fn postgres(dir: &tempfile::TempDir) -> Option<Arc<dyn Store>> {
    let url = pg::fresh_database()?;
    DATABASES
        .lock()
        .unwrap()
        .push((dir.path().to_path_buf(), url.clone()));
    Some(open_postgres(url))
}

fn open_postgres(url: String) -> Arc<dyn Store> {
    Arc::new(PgStore::open(&PgOptions { url, pool_size: 4 }).expect("open postgres"))
}

/// A second instance on the store made in `dir`, for a backend that several instances share
/// (PostgreSQL: another store opened on the same database); `None` for a store only one
/// process uses (sled holds its directory's lock).
fn another_instance(dir: &tempfile::TempDir) -> Option<Arc<dyn Store>> {
    let url = DATABASES
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|(made_in, _)| made_in == dir.path())
        .map(|(_, url)| url.clone())?;
    Some(open_postgres(url))
}

fn new_link(code: CodeChoice, url: &str) -> NewLink {
    NewLink {
        dedup: matches!(code, CodeChoice::Pool(_)),
        code,
        url: url.to_string(),
        space: "default".into(),
        expires_at: None,
        title: None,
        tags: Vec::new(),
        options: None,
        domain: 0,
        now: T0,
    }
}

fn fill(store: &dyn Store, length: u8, codes: &[&str], score: u64) {
    store
        .pool_add(&PoolBatch {
            length,
            codes: codes.iter().map(|c| c.to_string()).collect(),
            score,
            now: T0,
            state: None,
            shuffle: false,
        })
        .expect("pool_add");
}

fn created(result: Result<Created, StoreError>) -> vshortlink::model::Link {
    match result.expect("create") {
        Created::New(link) => link,
        Created::Existing(link) => panic!("a dedup hit where a new link was expected: {link:?}"),
    }
}

/// Creates take the lowest due code of the pool (ZPOPMIN), each code once; an empty pool says
/// so.
fn pool_takes_lowest_code_once(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    fill(&*store, 6, &["100002", "100000", "100001"], T0);
    assert_eq!(store.pool_counts(6, T0).unwrap().available, 3);
    let a = created(store.create_link(&new_link(CodeChoice::Pool(6), "https://a.example/")));
    assert_eq!(a.code, "100000");
    assert!(!store.in_pool("100000").unwrap());
    let b = created(store.create_link(&new_link(CodeChoice::Pool(6), "https://b.example/")));
    let c = created(store.create_link(&new_link(CodeChoice::Pool(6), "https://c.example/")));
    assert_eq!((b.code.as_str(), c.code.as_str()), ("100001", "100002"));
    assert!(a.id < b.id && b.id < c.id, "ids grow");
    match store.create_link(&new_link(CodeChoice::Pool(6), "https://d.example/")) {
        Err(StoreError::PoolEmpty(6)) => {}
        other => panic!("an empty pool: {other:?}"),
    }
    assert_eq!(store.pool_counts(6, T0).unwrap().available, 0);
}

/// Codes scored in the future (cooling) are not handed out before their time.
fn cooling_codes_wait(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    fill(&*store, 5, &["10000"], T0 + DAY);
    let counts = store.pool_counts(5, T0).unwrap();
    assert_eq!((counts.available, counts.cooling), (0, 1));
    assert!(matches!(
        store.create_link(&new_link(CodeChoice::Pool(5), "https://a.example/")),
        Err(StoreError::PoolEmpty(5))
    ));
}

/// The same URL in the same space and length returns the existing link and takes no code;
/// custom links are never dedup targets.
fn dedup_returns_the_existing_generated_link(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    fill(&*store, 6, &["100000", "100001", "100002"], T0);
    let first = created(store.create_link(&new_link(CodeChoice::Pool(6), "https://x.example/")));
    match store
        .create_link(&new_link(CodeChoice::Pool(6), "https://x.example/"))
        .unwrap()
    {
        Created::Existing(link) => assert_eq!(link.id, first.id),
        other => panic!("expected the existing link: {other:?}"),
    }
    assert_eq!(
        store.pool_counts(6, T0).unwrap().available,
        2,
        "no code taken"
    );
    let mut other_space = new_link(CodeChoice::Pool(6), "https://x.example/");
    other_space.space = "sports".into();
    let in_sports = created(store.create_link(&other_space));
    assert_ne!(in_sports.id, first.id);
    let custom = created(store.create_link(&new_link(
        CodeChoice::Custom("mine".into()),
        "https://y.example/",
    )));
    assert!(custom.custom);
    let generated =
        created(store.create_link(&new_link(CodeChoice::Pool(6), "https://y.example/")));
    assert_ne!(
        generated.id, custom.id,
        "a custom link is not a dedup target"
    );
}

/// A custom code in use is refused; one sitting in a pool is taken out of it.
fn custom_codes(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    fill(&*store, 6, &["abcdef"], T0);
    created(store.create_link(&new_link(
        CodeChoice::Custom("abcdef".into()),
        "https://a.example/",
    )));
    assert!(!store.in_pool("abcdef").unwrap());
    assert_eq!(store.pool_counts(6, T0).unwrap().available, 0);
    match store.create_link(&new_link(
        CodeChoice::Custom("abcdef".into()),
        "https://b.example/",
    )) {
        Err(StoreError::CodeTaken(code)) => assert_eq!(code, "abcdef"),
        other => panic!("a taken code: {other:?}"),
    }
    assert_eq!(store.link_counts().unwrap().active, 1);
}

/// Update and delete: the active mapping follows; the record stays, deleted.
fn update_and_delete(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let link = created(store.create_link(&new_link(
        CodeChoice::Custom("code1".into()),
        "https://a.example/",
    )));
    assert_eq!(
        store.resolve("code1").unwrap().unwrap().url,
        "https://a.example/"
    );
    let patch = LinkPatch {
        url: Some("https://b.example/".into()),
        title: Some(Some("t".into())),
        tags: Some(vec!["x".into()]),
        expires_at: Some(Some(T0 + DAY)),
        ..LinkPatch::default()
    };
    let updated = store.update_link("code1", &patch, T0 + 1).unwrap();
    assert_eq!(
        (updated.url.as_str(), updated.updated_at),
        ("https://b.example/", T0 + 1)
    );
    let entry = store.resolve("code1").unwrap().unwrap();
    assert_eq!(
        (entry.url.as_str(), entry.expires_at),
        ("https://b.example/", Some(T0 + DAY))
    );
    let deleted = store.delete_link("code1", T0 + 2).unwrap();
    assert_eq!(deleted.status, LinkStatus::Deleted);
    assert!(store.resolve("code1").unwrap().is_none());
    assert_eq!(
        store.link_by_id(link.id).unwrap().unwrap().status,
        LinkStatus::Deleted
    );
    assert!(matches!(
        store.update_link("code1", &LinkPatch::default(), T0 + 3),
        Err(StoreError::WrongStatus(LinkStatus::Deleted))
    ));
    assert!(matches!(
        store.update_link("nosuch", &LinkPatch::default(), T0 + 3),
        Err(StoreError::NotFound)
    ));
    let counts = store.link_counts().unwrap();
    assert_eq!((counts.active, counts.deleted), (0, 1));
}

/// Expiry and recycling: an expired link leaves the mapping; recycled, its code returns to
/// its pool cooling, and the record is archived.
fn expire_then_recycle(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    fill(&*store, 6, &["100000"], T0);
    let mut req = new_link(CodeChoice::Pool(6), "https://a.example/");
    req.expires_at = Some(T0 + DAY);
    let link = created(store.create_link(&req));
    assert!(
        store.expire_link(link.id, T0).unwrap().is_none(),
        "not yet due"
    );
    let due = store.due_for_expiry(T0 + DAY, 10).unwrap();
    assert_eq!(due.iter().map(|l| l.id).collect::<Vec<_>>(), vec![link.id]);
    let expired = store.expire_link(link.id, T0 + DAY).unwrap().unwrap();
    assert_eq!(expired.status, LinkStatus::Expired);
    assert!(store.resolve("100000").unwrap().is_none());
    let ended = store.due_for_recycling(T0 + 2 * DAY, 10).unwrap();
    assert_eq!(
        ended.iter().map(|l| l.id).collect::<Vec<_>>(),
        vec![link.id]
    );
    let recycled = store.recycle_link(link.id, T0 + 30 * DAY).unwrap().unwrap();
    assert_eq!(recycled.status, LinkStatus::Archived);
    assert!(store.in_pool("100000").unwrap());
    let counts = store.pool_counts(6, T0 + 2 * DAY).unwrap();
    assert_eq!((counts.available, counts.cooling), (0, 1));
    assert!(
        store.recycle_link(link.id, T0).unwrap().is_none(),
        "once only"
    );
    assert_eq!(store.link_counts().unwrap().archived, 1);
}

/// Expiring a group: only the active links that are due expire, each once, with their
/// redirect entries, dedup entries and counters; the rest are left as they were.
fn expire_links_takes_only_due_active_links(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    fill(&*store, 6, &["200000", "200001", "200002", "200003"], T0);
    let make_link = |url: &str, expires_at: Option<u64>| {
        let mut req = new_link(CodeChoice::Pool(6), url);
        req.expires_at = expires_at;
        created(store.create_link(&req))
    };
    let due = make_link("https://due.example/", Some(T0 + DAY));
    let later = make_link("https://later.example/", Some(T0 + 3 * DAY));
    let never = make_link("https://never.example/", None);
    let deleted = make_link("https://deleted.example/", Some(T0 + DAY));
    store.delete_link(&deleted.code, T0).unwrap();
    let ids = [due.id, later.id, never.id, deleted.id, 999_999];
    let expired = store.expire_links(&ids, T0 + DAY).unwrap();
    assert_eq!(expired.iter().map(|l| l.id).collect::<Vec<_>>(), [due.id]);
    assert_eq!(expired[0].status, LinkStatus::Expired);
    assert!(store.resolve(&due.code).unwrap().is_none());
    assert!(store.resolve(&later.code).unwrap().is_some());
    assert!(store.resolve(&never.code).unwrap().is_some());
    assert!(
        store
            .dedup_target("default", 0, 6, &due.url)
            .unwrap()
            .is_none(),
        "its dedup entry is gone"
    );
    let counts = store.link_counts().unwrap();
    assert_eq!((counts.active, counts.expired, counts.deleted), (2, 1, 1));
    assert!(
        store.expire_links(&ids, T0 + DAY).unwrap().is_empty(),
        "once only"
    );
    assert_eq!(store.expire_links(&ids, T0 + 3 * DAY).unwrap().len(), 1);
}

/// Listing: id order or newest first, with a cursor; the query's rule picks the links.
fn list_with_cursor_and_search(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    for (i, title) in ["Alpha", "beta", "alphabet", "gamma"].iter().enumerate() {
        let mut req = new_link(
            CodeChoice::Custom(format!("c{i}")),
            &format!("https://{i}.example/"),
        );
        req.title = Some(title.to_string());
        created(store.create_link(&req));
    }
    let page = |q: LinkQuery| store.list_links(&q).unwrap();
    let all = page(LinkQuery {
        limit: 2,
        ..LinkQuery::default()
    });
    assert_eq!(
        all.items
            .iter()
            .map(|l| l.code.as_str())
            .collect::<Vec<_>>(),
        ["c0", "c1"]
    );
    let rest = page(LinkQuery {
        limit: 10,
        after: all.next,
        ..LinkQuery::default()
    });
    assert_eq!(
        rest.items
            .iter()
            .map(|l| l.code.as_str())
            .collect::<Vec<_>>(),
        ["c2", "c3"]
    );
    let newest = page(LinkQuery {
        limit: 3,
        newest_first: true,
        ..LinkQuery::default()
    });
    assert_eq!(
        newest
            .items
            .iter()
            .map(|l| l.code.as_str())
            .collect::<Vec<_>>(),
        ["c3", "c2", "c1"]
    );
    let found = page(
        LinkQuery {
            limit: 10,
            ..LinkQuery::default()
        }
        .search(Some("ALPHA")),
    );
    assert_eq!(
        found
            .items
            .iter()
            .map(|l| l.code.as_str())
            .collect::<Vec<_>>(),
        ["c0", "c2"]
    );
    let by_length = page(LinkQuery {
        limit: 10,
        length: Some(3),
        ..LinkQuery::default()
    });
    assert!(by_length.items.is_empty());
    // By domain (SPEC §26): the same code on another domain is listed with that domain only.
    let mut away = new_link(CodeChoice::Custom("c0".into()), "https://away.example/");
    away.domain = 7;
    let away = created(store.create_link(&away));
    let codes_on = |domain: u16| -> Vec<(String, u16)> {
        page(LinkQuery {
            limit: 10,
            domain: Some(domain),
            ..LinkQuery::default()
        })
        .items
        .iter()
        .map(|l| (l.code.clone(), l.domain))
        .collect()
    };
    assert_eq!(codes_on(7), [("c0".to_string(), 7)]);
    assert_eq!(codes_on(0).len(), 4);
    assert!(codes_on(8).is_empty());
    let found = page(
        LinkQuery {
            limit: 10,
            domain: Some(7),
            ..LinkQuery::default()
        }
        .search(Some("away")),
    );
    assert_eq!(
        found.items.iter().map(|l| l.id).collect::<Vec<_>>(),
        [away.id]
    );
    assert_eq!(
        page(LinkQuery {
            limit: 10,
            ..LinkQuery::default()
        })
        .items
        .len(),
        5
    );
}

/// Visits: totals count every visit, listings run both ways, days count them.
fn visits_are_counted_and_listed(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let mut batch: Vec<NewVisit> = (0..5u64)
        .map(|i| NewVisit {
            visit: Visit {
                link_id: 7,
                code: "code7".into(),
                at: T0 + i,
                client_id: format!("{i:040x}").into(),
                is_bot: i == 4,
                ..Visit::default()
            },
            client_hash: i,
            referer_host: "".into(),
        })
        .collect();
    store.record_visits(&mut batch).unwrap();
    let totals = store.visit_totals(7).unwrap();
    assert_eq!((totals.visits, totals.bots), (5, 1));
    let oldest = store.visits_page(7, None, 3).unwrap();
    let times: Vec<u64> = oldest.items.iter().map(|v| v.at - T0).collect();
    assert_eq!(times, [0, 1, 2]);
    let next = store.visits_page(7, oldest.next, 10).unwrap();
    assert_eq!(next.items.len(), 2);
    let newest = store.recent_visits(7, None, 3).unwrap();
    let times: Vec<u64> = newest.items.iter().map(|v| v.at - T0).collect();
    assert_eq!(times, [4, 3, 2]);
    let older = store.recent_visits(7, newest.next, 10).unwrap();
    assert_eq!(
        older.items.iter().map(|v| v.at - T0).collect::<Vec<_>>(),
        [1, 0]
    );
    let day = T0 / DAY;
    let days = store.day_counts(day, day).unwrap();
    assert_eq!(days.iter().map(|d| d.visits).sum::<u64>(), 5);
    assert_eq!(
        store.visit_totals(8).unwrap().visits,
        0,
        "another link's visits stay apart"
    );
}

/// `meta_init` keeps the first value written.
fn meta_keeps_the_first_value(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    assert_eq!(store.meta_get("k").unwrap(), None);
    assert_eq!(store.meta_init("k", b"one").unwrap(), b"one");
    assert_eq!(store.meta_init("k", b"two").unwrap(), b"one");
    assert_eq!(store.meta_get("k").unwrap().as_deref(), Some(&b"one"[..]));
}

/// HTTPS's certificate state: values by key, replaced, deleted.
fn tls_values_are_kept_by_key(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    assert_eq!(store.tls_get("cert:go.example").unwrap(), None);
    store.tls_put("cert:go.example", b"one").unwrap();
    store.tls_put("account:https://ca/dir", b"acct").unwrap();
    store.tls_put("cert:go.example", b"two").unwrap();
    assert_eq!(
        store.tls_get("cert:go.example").unwrap().as_deref(),
        Some(&b"two"[..])
    );
    store.tls_delete("cert:go.example").unwrap();
    store.tls_delete("cert:never.example").unwrap();
    assert_eq!(store.tls_get("cert:go.example").unwrap(), None);
    assert_eq!(
        store.tls_get("account:https://ca/dir").unwrap().as_deref(),
        Some(&b"acct"[..])
    );
}

/// One `#[test]` per case for a backend: `backend!(name; cases…)` makes `mod name`.
/// Imported records keep their code, status and (when free) id; importing again changes
/// nothing; a code leading elsewhere is a conflict; an imported code leaves its pool.
fn import_keeps_records_and_is_idempotent(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    fill(&*store, 6, &["imp001", "imp002"], T0);
    let record = |id: u64, code: &str, url: &str, status: LinkStatus| Link {
        id,
        code: code.into(),
        url: url.into(),
        space: "default".into(),
        custom: false,
        created_at: T0 - DAY,
        expires_at: None,
        status,
        title: Some("t".into()),
        tags: vec!["a".into(), "b".into()],
        updated_at: T0 - DAY,
        deleted_at: None,
        options: None,
        ended_by: None,
        review: None,
        domain: 0,
    };
    let batch = [
        record(40, "imp001", "https://x.example/1", LinkStatus::Active),
        record(41, "imq002", "https://x.example/2", LinkStatus::Deleted),
    ];
    let first = store.import_links(&batch).unwrap();
    assert!(matches!(&first[0], Imported::Created(l) if l.id == 40 && l.code == "imp001"));
    assert!(matches!(&first[1], Imported::Created(l) if l.id == 41));
    assert!(
        !store.in_pool("imp001").unwrap(),
        "an imported code leaves its pool"
    );
    assert_eq!(store.resolve("imp001").unwrap().map(|e| e.id), Some(40));
    assert_eq!(
        store.resolve("imq002").unwrap(),
        None,
        "a deleted record does not redirect"
    );
    let got = store.link_by_code("imp001").unwrap().unwrap();
    assert_eq!((got.title.as_deref(), got.tags.len()), (Some("t"), 2));
    let again = store.import_links(&batch).unwrap();
    assert!(again.iter().all(|r| matches!(r, Imported::Unchanged(_))));
    let elsewhere = store
        .import_links(&[record(
            50,
            "imp001",
            "https://y.example/",
            LinkStatus::Active,
        )])
        .unwrap();
    assert!(matches!(&elsewhere[0], Imported::Conflict(l) if l.id == 40));
    let archived = record(60, "imp002", "https://x.example/old", LinkStatus::Archived);
    assert!(matches!(
        &store.import_links(std::slice::from_ref(&archived)).unwrap()[0],
        Imported::Created(l) if l.id == 60
    ));
    assert!(matches!(
        &store.import_links(&[archived]).unwrap()[0],
        Imported::Unchanged(_)
    ));
    // A create after the import never reuses an imported id.
    let made = created(store.create_link(&new_link(CodeChoice::Pool(6), "https://z.example/")));
    assert!(![40, 41, 60].contains(&made.id), "id {} reused", made.id);
    let counts = store.link_counts().unwrap();
    assert_eq!((counts.active, counts.deleted, counts.archived), (2, 1, 1));
}

/// Creates handed over with `submit_create` (many at once, as the API's handlers do) are each
/// answered once, take distinct codes, dedup against each other, and are there
/// when answered; a pool that runs dry answers `PoolEmpty` for the creates it cannot serve.
fn submitted_creates_are_answered_once_each(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let codes: Vec<String> = (0..150).map(|i| format!("2{i:05}")).collect();
    let refs: Vec<&str> = codes.iter().map(String::as_str).collect();
    fill(&*store, 6, &refs, T0);
    let (answer, answers) = std::sync::mpsc::channel();
    // 160 creates of 150 distinct URLs: the last ten repeat earlier ones (dedup hits).
    for i in 0..160 {
        let answer = answer.clone();
        let url = format!("https://submitted.example/{}", i % 150);
        store.submit_create(
            new_link(CodeChoice::Pool(6), &url),
            Box::new(move |outcome| answer.send((i, outcome)).expect("send")),
        );
    }
    drop(answer);
    let mut outcomes: Vec<_> = answers.iter().collect();
    assert_eq!(outcomes.len(), 160, "every create is answered exactly once");
    outcomes.sort_by_key(|(i, _)| *i);
    let mut by_url = std::collections::HashMap::new();
    let mut taken = std::collections::HashSet::new();
    for (i, outcome) in outcomes {
        let link = match outcome.expect("create") {
            Created::New(link) => {
                assert!(
                    taken.insert(link.code.clone()),
                    "code {} given twice",
                    link.code
                );
                link
            }
            Created::Existing(link) => link,
        };
        assert_eq!(link.url, format!("https://submitted.example/{}", i % 150));
        let first = by_url
            .entry(link.url.clone())
            .or_insert_with(|| link.code.clone());
        assert_eq!(*first, link.code, "one URL, one link");
        assert_eq!(
            store.resolve(&link.code).unwrap().map(|e| e.url),
            Some(link.url)
        );
    }
    assert_eq!(taken.len(), 150);
    assert_eq!(store.pool_counts(6, T0).unwrap().available, 0);
    let (answer, answers) = std::sync::mpsc::channel();
    store.submit_create(
        new_link(CodeChoice::Pool(6), "https://submitted.example/more"),
        Box::new(move |outcome| answer.send(outcome).expect("send")),
    );
    assert!(matches!(
        answers.recv().expect("answered"),
        Err(StoreError::PoolEmpty(6))
    ));
}

fn options_travel_with_the_link(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let options = LinkOptions {
        password: Some("$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaA".into()),
        max_visits: Some(3),
        rules: vec![Rule {
            when: Conditions {
                os: vec![Os::Ios],
                ip: vec!["10.0.0.0/8".parse().unwrap()],
                ..Conditions::default()
            },
            url: "https://ios.example/".into(),
        }],
        targets: vec![Target {
            url: "https://t.example/".into(),
            weight: 5,
            max_visits: Some(2),
        }],
        rotation: Rotation::Failover,
        ..LinkOptions::default()
    };
    let mut new = new_link(CodeChoice::Custom("opt001".into()), "https://a.example/");
    new.options = Some(Box::new(options.clone()));
    let link = created(store.create_link(&new));
    assert_eq!(link.options.as_deref(), Some(&options));
    let entry = store.resolve("opt001").unwrap().unwrap();
    assert_eq!(
        entry.options.as_deref(),
        Some(&options),
        "the redirect sees them"
    );
    assert_eq!(
        store
            .link_by_code("opt001")
            .unwrap()
            .unwrap()
            .options
            .as_deref(),
        Some(&options)
    );
    // A patch changes one option and leaves the others.
    let patch = LinkPatch {
        options: OptionsPatch {
            max_visits: Some(None),
            ..OptionsPatch::default()
        },
        ..LinkPatch::default()
    };
    let updated = store.update_link("opt001", &patch, T0 + 1).unwrap();
    let left = updated.options.as_deref().unwrap();
    assert_eq!(left.max_visits, None);
    assert_eq!(left.rules, options.rules);
    assert_eq!(
        store
            .resolve("opt001")
            .unwrap()
            .unwrap()
            .options
            .unwrap()
            .max_visits,
        None
    );
    // Ended by its cap: expired, saying why.
    let end = LinkPatch {
        end: Some(EndedBy::MaxVisits),
        ..LinkPatch::default()
    };
    store.update_link("opt001", &end, T0 + 2).unwrap();
    let ended = store.expire_link(link.id, T0 + 2).unwrap().unwrap();
    assert_eq!(ended.status, LinkStatus::Expired);
    assert_eq!(ended.ended_by(), Some(EndedBy::MaxVisits));
    assert_eq!(
        store.link_by_code("opt001").unwrap().unwrap().ended_by,
        Some(EndedBy::MaxVisits)
    );
    assert!(store.resolve("opt001").unwrap().is_none());
}

fn claim(store: &dyn Store, link_id: u64, slots: Vec<(CapSlot, u64)>) -> ClaimOutcome {
    let (tx, rx) = std::sync::mpsc::channel();
    store.claim_visit(
        VisitClaim { link_id, slots },
        Box::new(move |outcome| {
            let _ = tx.send(outcome);
        }),
    );
    rx.recv().unwrap().unwrap()
}

fn claims_never_pass_a_cap(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let (link, target) = (CapSlot::Link, CapSlot::Target(1));
    assert_eq!(
        claim(&*store, 7, vec![(link, 3), (target, 1)]),
        ClaimOutcome::Granted
    );
    // The target is full: nothing is counted, the link's count included.
    assert_eq!(
        claim(&*store, 7, vec![(link, 3), (target, 1)]),
        ClaimOutcome::Full(target)
    );
    assert_eq!(claim(&*store, 7, vec![(link, 3)]), ClaimOutcome::Granted);
    assert_eq!(store.counted(7).unwrap(), vec![(link, 2), (target, 1)]);
    // Concurrent claims take exactly what is left.
    let granted: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..16)
            .map(|_| s.spawn(|| claim(&*store, 7, vec![(link, 10)]) == ClaimOutcome::Granted))
            .collect();
        handles
            .into_iter()
            .map(|h| usize::from(h.join().unwrap()))
            .sum()
    });
    assert_eq!(granted, 8);
    assert_eq!(store.counted(7).unwrap()[0], (link, 10));
    assert!(
        store.counted(8).unwrap().is_empty(),
        "another link is untouched"
    );
    // An import raises counts, never lowers them.
    store.import_counted(8, &[(link, 4)]).unwrap();
    store.import_counted(8, &[(link, 2)]).unwrap();
    assert_eq!(store.counted(8).unwrap(), vec![(link, 4)]);
}

fn lead(link_id: u64, at: u64, phone: &str) -> Lead {
    Lead {
        id: 0,
        link_id,
        at,
        values: vec![
            ("phone".into(), phone.into()),
            ("name".into(), "Ada \"=1\" 李".into()),
        ],
        consent: Some("I agree".into()),
    }
}

fn leads_are_kept_by_link(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let a = store.add_lead(lead(1, T0, "+100000001")).unwrap();
    let b = store.add_lead(lead(1, T0 + DAY, "+100000002")).unwrap();
    let c = store.add_lead(lead(2, T0 + DAY, "+100000003")).unwrap();
    assert!(a.id > 0 && b.id > a.id && c.id > b.id, "ids increase");
    assert_eq!(
        a.values,
        lead(1, T0, "+100000001").values,
        "values as given"
    );
    assert_eq!(store.lead_count(1).unwrap(), 2);
    assert_eq!(store.lead_count(2).unwrap(), 1);
    assert_eq!(store.lead_count(3).unwrap(), 0);
    // Newest first, paged by cursor.
    let page = store.leads(1, None, 1).unwrap();
    assert_eq!(page.leads, vec![b.clone()]);
    let next = store.leads(1, page.next, 1).unwrap();
    assert_eq!(next.leads, vec![a.clone()]);
    assert_eq!(next.next, None);
    assert_eq!(
        store.leads(1, None, 10).unwrap().leads,
        vec![b.clone(), a.clone()]
    );
    let mut links = store.lead_links().unwrap();
    links.sort_unstable();
    assert_eq!(links, vec![1, 2]);
    // Retention: before a time, then all.
    assert_eq!(store.delete_leads(1, Some(T0 + 1)).unwrap(), 1);
    assert_eq!(store.leads(1, None, 10).unwrap().leads, vec![b.clone()]);
    assert_eq!(store.lead_count(1).unwrap(), 1);
    assert_eq!(store.delete_leads(2, None).unwrap(), 1);
    assert_eq!(store.lead_count(2).unwrap(), 0);
    assert_eq!(
        store.lead_links().unwrap(),
        vec![1],
        "a link with no lead left is not listed"
    );
    // An import keeps ids, skips what is there, and later leads get ids above it.
    let imported = Lead {
        id: c.id + 100,
        ..lead(5, T0, "+100000009")
    };
    assert_eq!(
        store.import_leads(&[imported.clone(), b.clone()]).unwrap(),
        1
    );
    assert_eq!(
        store.import_leads(std::slice::from_ref(&imported)).unwrap(),
        0
    );
    assert_eq!(
        store.leads(5, None, 10).unwrap().leads,
        vec![imported.clone()]
    );
    let after = store.add_lead(lead(5, T0 + 2 * DAY, "+100000010")).unwrap();
    assert!(after.id > imported.id, "{} > {}", after.id, imported.id);
    assert_eq!(store.lead_count(5).unwrap(), 2);
}

fn gates_travel_with_the_link(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let options = LinkOptions {
        in_app: Some(InApp::Interstitial),
        form: Some(LeadForm {
            fields: vec![FormField {
                name: "phone".into(),
                label: "手机号".into(),
                kind: FieldKind::Tel,
                required: true,
            }],
            consent: Some("OK".into()),
            retention: 30 * DAY,
        }),
        preview: Some(SocialPreview {
            title: Some("T <b>".into()),
            description: None,
            image: Some("https://img.example/a.png".into()),
        }),
        ..LinkOptions::default()
    };
    let mut new = new_link(CodeChoice::Custom("gated".into()), "https://example.com/g");
    new.options = Some(Box::new(options.clone()));
    let link = created(store.create_link(&new));
    assert_eq!(link.options.as_deref(), Some(&options));
    assert_eq!(
        store
            .link_by_code("gated")
            .unwrap()
            .unwrap()
            .options
            .as_deref(),
        Some(&options)
    );
    assert_eq!(
        store.resolve("gated").unwrap().unwrap().options.as_deref(),
        Some(&options),
        "the redirect's one read carries the gates"
    );
}

fn review(link_id: u64, at: u64, verdict: Verdict) -> Review {
    Review {
        id: 0,
        link_id,
        at,
        trigger: Trigger::Created,
        checks: vec![CheckRecord {
            check: "fetch".into(),
            outcome: "ok".into(),
            detail: "200 text/html".into(),
        }],
        score: Some(0.25),
        reason: Some("fine".into()),
        verdict,
        final_url: Some("https://example.com/".into()),
        title: Some("Example".into()),
        description: None,
        screenshot: false,
        by: None,
    }
}

fn the_review_queue_takes_each_link_once(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    assert!(store.queue_review(7, Trigger::Created, T0).unwrap());
    assert!(
        !store.queue_review(7, Trigger::Visits, T0 + 1).unwrap(),
        "at most once"
    );
    assert!(store.queue_review(3, Trigger::Requested, T0 + 5).unwrap());
    assert_eq!(store.review_queue_depth().unwrap(), 2);
    // Oldest first; a leased entry is not taken again until its lease ends.
    let first = store.take_review(T0 + 10, 100_000).unwrap().unwrap();
    assert_eq!((first.link_id, first.trigger), (7, Trigger::Created));
    let second = store.take_review(T0 + 10, 1000).unwrap().unwrap();
    assert_eq!(second.link_id, 3);
    assert_eq!(store.take_review(T0 + 10, 1000).unwrap(), None);
    // Link 3's worker died: after the lease it is taken again.
    assert_eq!(
        store
            .take_review(T0 + 2000, 1000)
            .unwrap()
            .map(|q| q.link_id),
        Some(3)
    );
    // Finishing takes the link out of the queue and files its verdict.
    let kept = store
        .add_review(review(7, T0 + 20, Verdict::Flagged), Some(b"\x89PNG"))
        .unwrap();
    assert!(kept.id > 0 && kept.screenshot);
    assert_eq!(store.review_queue_depth().unwrap(), 1);
    assert_eq!(
        store.review_screenshot(7, kept.id).unwrap().as_deref(),
        Some(&b"\x89PNG"[..])
    );
    // Asked for as another link's: none.
    assert_eq!(store.review_screenshot(8, kept.id).unwrap(), None);
    assert_eq!(store.reviews(7, 10).unwrap(), vec![kept.clone()]);
    assert_eq!(
        store.links_by_verdict(Verdict::Flagged, None, 10).unwrap(),
        (vec![7], None)
    );
    // A newer verdict moves the link; the listing is newest first.
    let again = store
        .add_review(review(7, T0 + 30, Verdict::Blocked), None)
        .unwrap();
    assert!(again.id > kept.id);
    assert_eq!(store.reviews(7, 10).unwrap(), vec![again.clone(), kept]);
    assert_eq!(
        store
            .links_by_verdict(Verdict::Flagged, None, 10)
            .unwrap()
            .0,
        Vec::<u64>::new()
    );
    assert_eq!(
        store
            .links_by_verdict(Verdict::Blocked, None, 10)
            .unwrap()
            .0,
        vec![7]
    );
    // Queued again while its review runs: reviewed once more afterwards.
    assert!(store.queue_review(9, Trigger::Created, T0 + 40).unwrap());
    let taken = store.take_review(T0 + 3000, 100_000).unwrap().unwrap();
    let taken = if taken.link_id == 9 {
        taken
    } else {
        store
            .add_review(review(taken.link_id, T0 + 41, Verdict::Ok), None)
            .unwrap();
        store.take_review(T0 + 3000, 100_000).unwrap().unwrap()
    };
    assert_eq!(taken.link_id, 9);
    assert!(
        store.queue_review(9, Trigger::Changed, T0 + 50).unwrap(),
        "kept for later"
    );
    store
        .add_review(review(9, T0 + 60, Verdict::Ok), None)
        .unwrap();
    assert_eq!(
        store
            .take_review(T0 + 3001, 1000)
            .unwrap()
            .map(|q| q.link_id),
        Some(9),
        "reviewed again"
    );
    store
        .add_review(review(9, T0 + 70, Verdict::Ok), None)
        .unwrap();
    assert_eq!(store.review_queue_depth().unwrap(), 0);
    let mut ok = store.links_by_verdict(Verdict::Ok, None, 1).unwrap();
    assert_eq!(ok.0.len(), 1);
    assert!(ok.1.is_some(), "a cursor when there are more");
    ok = store.links_by_verdict(Verdict::Ok, ok.1, 10).unwrap();
    assert_eq!(ok.1, None);
}

fn ids(links: &[Link]) -> Vec<u64> {
    links.iter().map(|l| l.id).collect()
}

/// A record as an import brings it.
fn import_record(id: u64, code: &str, url: &str, status: LinkStatus) -> Link {
    Link {
        id,
        code: code.into(),
        url: url.into(),
        space: "default".into(),
        custom: false,
        created_at: T0 - DAY,
        expires_at: None,
        status,
        title: None,
        tags: Vec::new(),
        updated_at: T0 - DAY,
        deleted_at: None,
        options: None,
        ended_by: None,
        review: None,
        domain: 0,
    }
}

/// `may_exist` never says no to a code that has existed, whatever became of its link; a store
/// only one process writes can tell a code that never existed (the redirect path's 404
/// without a read), one that several instances write always answers maybe.
fn may_exist_never_denies_a_code_that_existed(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    fill(&*store, 6, &["300000"], T0);
    let pooled = created(store.create_link(&new_link(CodeChoice::Pool(6), "https://a.example/")));
    created(store.create_link(&new_link(
        CodeChoice::Custom("mayex1".into()),
        "https://b.example/",
    )));
    created(store.create_link(&new_link(
        CodeChoice::Custom("mayex2".into()),
        "https://c.example/",
    )));
    store.delete_link("mayex2", T0 + 1).unwrap();
    let imported = store
        .import_links(&[import_record(
            90,
            "mayex3",
            "https://d.example/",
            LinkStatus::Active,
        )])
        .unwrap();
    assert!(matches!(&imported[0], Imported::Created(_)));
    for code in [pooled.code.as_str(), "mayex1", "mayex2", "mayex3"] {
        assert!(store.may_exist(code), "{code} existed: maybe, never no");
    }
    let never: Vec<String> = (0..64).map(|i| format!("never{i:03}")).collect();
    let denied = never.iter().filter(|code| !store.may_exist(code)).count();
    if store.cluster().is_none() {
        assert!(
            denied > 0,
            "a store one process writes tells codes that never existed (none of 64 denied)"
        );
    }
}

/// Retiring takes an ended link out of the recycling queue for good: it keeps its code (owned,
/// not pooled, not to be taken), and a second retire, or one of a link never queued, is false.
fn retire_link_takes_a_link_out_of_recycling(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    fill(&*store, 6, &["400000", "400001"], T0);
    let mut req = new_link(CodeChoice::Pool(6), "https://a.example/");
    req.expires_at = Some(T0 + DAY);
    let expiring = created(store.create_link(&req));
    let deleted = created(store.create_link(&new_link(CodeChoice::Pool(6), "https://b.example/")));
    let active = created(store.create_link(&new_link(
        CodeChoice::Custom("retir3".into()),
        "https://c.example/",
    )));
    assert!(
        !store.retire_link(active.id).unwrap(),
        "an active link is not queued"
    );
    assert!(!store.retire_link(999_999).unwrap(), "no such link");
    store.expire_link(expiring.id, T0 + DAY).unwrap().unwrap();
    store.delete_link(&deleted.code, T0 + DAY + 1).unwrap();
    assert_eq!(
        ids(&store.due_for_recycling(T0 + 2 * DAY, 10).unwrap()),
        [expiring.id, deleted.id]
    );
    assert!(store.retire_link(expiring.id).unwrap());
    assert!(!store.retire_link(expiring.id).unwrap(), "once only");
    assert_eq!(
        ids(&store.due_for_recycling(T0 + 2 * DAY, 10).unwrap()),
        [deleted.id]
    );
    assert!(store.retire_link(deleted.id).unwrap());
    assert!(store
        .due_for_recycling(T0 + 2 * DAY, 10)
        .unwrap()
        .is_empty());
    // Both keep their codes for ever.
    for link in [&expiring, &deleted] {
        let kept = store.link_by_code(&link.code).unwrap().unwrap();
        assert_eq!(kept.id, link.id);
        assert!(!store.in_pool(&link.code).unwrap());
        assert!(store.may_exist(&link.code));
        match store.create_link(&new_link(
            CodeChoice::Custom(link.code.clone()),
            "https://z.example/",
        )) {
            Err(StoreError::CodeTaken(code)) => assert_eq!(code, link.code),
            other => panic!("a retired code is taken: {other:?}"),
        }
    }
    let counts = store.link_counts().unwrap();
    assert_eq!(
        (
            counts.active,
            counts.expired,
            counts.deleted,
            counts.archived
        ),
        (1, 1, 1, 0)
    );
    assert_eq!(store.pool_counts(6, T0 + 60 * DAY).unwrap().available, 0);
}

/// `queue_reviews` queues a batch at once: each link at most once (a link twice in the batch
/// counts once, one already waiting not again), keeping the first trigger; one queued again
/// while under review counts, once.
fn queue_reviews_queues_each_link_once(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    assert_eq!(store.queue_reviews(&[], T0).unwrap(), 0);
    assert_eq!(
        store
            .queue_reviews(
                &[
                    (1, Trigger::Created),
                    (2, Trigger::Visits),
                    (1, Trigger::Changed)
                ],
                T0
            )
            .unwrap(),
        2
    );
    assert_eq!(store.review_queue_depth().unwrap(), 2);
    assert_eq!(
        store
            .queue_reviews(&[(2, Trigger::Visits), (3, Trigger::Requested)], T0 + 1)
            .unwrap(),
        1,
        "link 2 already waits"
    );
    assert_eq!(store.review_queue_depth().unwrap(), 3);
    let first = store.take_review(T0 + 10, 100_000).unwrap().unwrap();
    assert_eq!(
        (first.link_id, first.trigger, first.at),
        (1, Trigger::Created, T0)
    );
    let second = store.take_review(T0 + 10, 100_000).unwrap().unwrap();
    assert_eq!((second.link_id, second.trigger), (2, Trigger::Visits));
    // Link 1 is under review: queued again (twice in one batch), it counts once.
    assert_eq!(
        store
            .queue_reviews(&[(1, Trigger::Changed), (1, Trigger::Changed)], T0 + 20)
            .unwrap(),
        1
    );
    assert_eq!(store.review_queue_depth().unwrap(), 3);
    store
        .add_review(review(1, T0 + 30, Verdict::Ok), None)
        .unwrap();
    // Link 1 waits again (where in the queue the contract leaves open), with link 3.
    let mut next: Vec<u64> = (0..2)
        .map(|_| {
            store
                .take_review(T0 + 40, 100_000)
                .unwrap()
                .unwrap()
                .link_id
        })
        .collect();
    next.sort_unstable();
    assert_eq!(next, [1, 3], "link 1 reviewed again");
    assert_eq!(store.take_review(T0 + 40, 100_000).unwrap(), None);
}

/// A renewed lease holds the link until its new end; renewing a link not under review leases
/// nothing.
fn renew_review_extends_a_lease(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    assert!(store.queue_review(5, Trigger::Created, T0).unwrap());
    let taken = store.take_review(T0, 1000).unwrap().unwrap();
    assert_eq!(taken.link_id, 5);
    store.renew_review(5, T0 + 10_000).unwrap();
    assert_eq!(
        store.take_review(T0 + 5000, 1000).unwrap(),
        None,
        "renewed: still leased after the first lease"
    );
    assert!(store.queue_review(6, Trigger::Created, T0 + 1).unwrap());
    store.renew_review(6, T0 + 10_000).unwrap();
    store.renew_review(77, T0 + 10_000).unwrap();
    assert_eq!(
        store
            .take_review(T0 + 5000, 1000)
            .unwrap()
            .map(|q| q.link_id),
        Some(6),
        "a renew of a link never taken leases nothing"
    );
    assert_eq!(
        store
            .take_review(T0 + 10_001, 1000)
            .unwrap()
            .map(|q| q.link_id),
        Some(5),
        "free once the renewed lease ends"
    );
    assert_eq!(store.review_queue_depth().unwrap(), 2);
}

/// `pool_below` answers what `pool_counts` would: fewer than `level` available at `now`.
fn pool_below_agrees_with_pool_counts(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    fill(&*store, 5, &["50000", "50001", "50002"], T0);
    fill(&*store, 5, &["50003"], T0 + DAY);
    let check = |now: u64, expect_available: u64| {
        let available = store.pool_counts(5, now).unwrap().available;
        assert_eq!(available, expect_available);
        for level in 0..=6 {
            assert_eq!(
                store.pool_below(5, now, level).unwrap(),
                available < level,
                "{available} available at {now}, level {level}"
            );
        }
    };
    check(T0, 3);
    created(store.create_link(&new_link(CodeChoice::Pool(5), "https://a.example/")));
    check(T0, 2);
    check(T0 + DAY - 1, 2);
    check(T0 + DAY, 3);
    assert!(store.pool_below(7, T0, 1).unwrap(), "an empty pool");
    assert!(!store.pool_below(7, T0, 0).unwrap());
}

/// A pool's levels at `now` are those at `now`, whatever was asked before: a question about a
/// later time does not make cooling codes count as available earlier.
fn pool_levels_do_not_depend_on_earlier_questions(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    fill(&*store, 5, &["50000"], T0);
    fill(&*store, 5, &["50003"], T0 + DAY);
    let levels = |now: u64| {
        let counts = store.pool_counts(5, now).unwrap();
        (counts.available, counts.cooling)
    };
    assert_eq!(levels(T0 + DAY), (2, 0));
    assert_eq!(levels(T0), (1, 1), "at T0 the second code still cools");
    assert!(store.pool_below(5, T0, 2).unwrap());
    created(store.create_link(&new_link(CodeChoice::Pool(5), "https://a.example/")));
    assert_eq!(levels(T0), (0, 1));
    assert!(
        matches!(
            store.create_link(&new_link(CodeChoice::Pool(5), "https://b.example/")),
            Err(StoreError::PoolEmpty(5))
        ),
        "a cooling code is not handed out early"
    );
    assert_eq!(levels(T0 + DAY), (1, 0));
}

/// `pool_peek` lists a pool in the order creates take it (score, then code; a shuffled batch
/// in its own order), cooling codes last, and takes nothing.
fn pool_peek_shows_the_order_codes_are_taken_in(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    fill(&*store, 6, &["600002", "600000"], T0);
    fill(&*store, 6, &["600001"], T0 - 10);
    fill(&*store, 6, &["600003"], T0 + DAY);
    let all = vec![
        (T0 - 10, "600001".to_string()),
        (T0, "600000".to_string()),
        (T0, "600002".to_string()),
        (T0 + DAY, "600003".to_string()),
    ];
    assert_eq!(store.pool_peek(6, 10).unwrap(), all);
    assert_eq!(store.pool_peek(6, 2).unwrap(), all[..2]);
    assert!(store.pool_peek(6, 0).unwrap().is_empty());
    assert!(store.pool_peek(7, 10).unwrap().is_empty());
    let counts = store.pool_counts(6, T0).unwrap();
    assert_eq!((counts.available, counts.cooling), (3, 1), "nothing taken");
    let a = created(store.create_link(&new_link(CodeChoice::Pool(6), "https://a.example/")));
    assert_eq!(a.code, "600001");
    assert_eq!(store.pool_peek(6, 10).unwrap(), all[1..]);
    // A shuffled batch: whatever its order, the next create takes the first peeked code.
    let codes: Vec<String> = (0..10).map(|i| format!("700000{i}")).collect();
    store
        .pool_add(&PoolBatch {
            length: 7,
            codes,
            score: T0,
            now: T0,
            state: None,
            shuffle: true,
        })
        .unwrap();
    for i in 0..10 {
        let peeked = store.pool_peek(7, 10).unwrap();
        assert_eq!(peeked.len(), 10 - i);
        let link = created(store.create_link(&new_link(
            CodeChoice::Pool(7),
            &format!("https://shuffled.example/{i}"),
        )));
        assert_eq!(link.code, peeked[0].1, "the create took the first peeked");
    }
    assert!(store.pool_peek(7, 10).unwrap().is_empty());
}

/// The strategy state is what the last `pool_add` of its length wrote, even one whose codes
/// were all refused.
fn strategy_state_is_what_pool_add_wrote(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    assert_eq!(store.strategy_state(6).unwrap(), None);
    let batch = |codes: &[&str], state: &[u8]| PoolBatch {
        length: 6,
        codes: codes.iter().map(|c| c.to_string()).collect(),
        score: T0,
        now: T0,
        state: Some(state.to_vec()),
        shuffle: false,
    };
    let added = store
        .pool_add(&batch(&["800000", "800001"], b"s1"))
        .unwrap();
    assert_eq!(
        added,
        PoolAdded {
            added: 2,
            skipped: 0
        }
    );
    assert_eq!(
        store.strategy_state(6).unwrap().as_deref(),
        Some(&b"s1"[..])
    );
    assert_eq!(store.strategy_state(5).unwrap(), None, "per length");
    let added = store.pool_add(&batch(&["800001"], b"s2")).unwrap();
    assert_eq!(
        added,
        PoolAdded {
            added: 0,
            skipped: 1
        }
    );
    assert_eq!(
        store.strategy_state(6).unwrap().as_deref(),
        Some(&b"s2"[..]),
        "the state moves on even when every code was refused"
    );
    assert_eq!(store.pool_counts(6, T0).unwrap().available, 2);
}

fn visit_at(link_id: u64, at: u64, client: u64, is_bot: bool, browser: &str) -> NewVisit {
    // A client id as the visit writer makes them: hex, its first 16 digits spread.
    let spread = client.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let client_id: Arc<str> = format!("{spread:016x}{client:024x}").into();
    NewVisit {
        client_hash: client_hash_of(&client_id),
        visit: Visit {
            link_id,
            code: format!("code{link_id}"),
            at,
            client_id,
            is_bot,
            browser: browser.into(),
            ..Visit::default()
        },
        referer_host: "".into(),
    }
}

/// Imported visits keep their ids, and `last_visit_id` reports the highest; visits recorded
/// afterwards get ids above them.
fn imported_visits_keep_their_ids(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    assert_eq!(store.last_visit_id().unwrap(), 0, "no visit yet");
    let mut batch: Vec<NewVisit> = [(10, 7, T0), (11, 7, T0 + 1), (5, 8, T0 + 2)]
        .into_iter()
        .map(|(id, link, at)| {
            let mut v = visit_at(link, at, id, false, "Firefox");
            v.visit.id = id;
            v
        })
        .collect();
    store.import_visits(&mut batch).unwrap();
    assert_eq!(store.last_visit_id().unwrap(), 11);
    let page_ids = |link: u64| -> Vec<u64> {
        store
            .visits_page(link, None, 10)
            .unwrap()
            .items
            .iter()
            .map(|v| v.id)
            .collect()
    };
    assert_eq!(page_ids(7), [10, 11]);
    assert_eq!(page_ids(8), [5]);
    assert_eq!(
        store.visits_page(7, None, 10).unwrap().items[1].at,
        T0 + 1,
        "the record as imported"
    );
    assert_eq!(store.visit_totals(7).unwrap().visits, 2);
    let day = T0 / DAY;
    assert_eq!(store.day_counts(day, day).unwrap()[0].visits, 3);
    let mut more = vec![visit_at(7, T0 + 3, 99, false, "Firefox")];
    store.record_visits(&mut more).unwrap();
    let given = more[0].visit.id;
    assert!(given > 11, "id {given} given after an import up to 11");
    assert_eq!(store.last_visit_id().unwrap(), given);
    assert_eq!(page_ids(7), [10, 11, given]);
}

/// `visit_summary` counts a link's visits by hour inside `from..to`; its top lists and
/// distinct (non-bot) visitors cover the whole UTC days the range touches.
fn visit_summary_counts_by_hour_within_the_range(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    assert_eq!(T0 % HOUR, 0);
    let h0 = T0 / HOUR;
    let mut first = vec![
        visit_at(7, T0 + 5, 1, false, "Firefox"),
        visit_at(7, T0 + HOUR + 1, 2, false, "Firefox"),
        visit_at(8, T0 + HOUR, 5, false, "Safari"),
    ];
    store.record_visits(&mut first).unwrap();
    let mut second = vec![
        visit_at(7, T0 + HOUR + 2, 3, true, "Chrome"),
        visit_at(7, T0 + 3 * HOUR, 4, false, "Chrome"),
    ];
    store.record_visits(&mut second).unwrap();
    let hour = |hour: u64, visits: u64, bots: u64| HourCount { hour, visits, bots };
    let browsers = |summary: &vshortlink::model::VisitSummary| {
        let mut b: Vec<(String, u64)> = summary
            .top
            .iter()
            .filter(|(dim, _, _)| *dim == Dimension::Browser)
            .map(|(_, value, n)| (value.clone(), *n))
            .collect();
        b.sort();
        b
    };
    let two_hours = store.visit_summary(7, T0, T0 + 2 * HOUR).unwrap();
    assert_eq!(two_hours.hours, [hour(h0, 1, 0), hour(h0 + 1, 2, 1)]);
    assert_eq!(
        browsers(&two_hours),
        [("Chrome".to_string(), 2), ("Firefox".to_string(), 2)],
        "the whole day's top list, bots included"
    );
    assert_eq!(two_hours.unique_visitors, 3, "the day's distinct non-bots");
    let four_hours = store.visit_summary(7, T0, T0 + 4 * HOUR).unwrap();
    assert_eq!(
        four_hours.hours,
        [hour(h0, 1, 0), hour(h0 + 1, 2, 1), hour(h0 + 3, 1, 0)]
    );
    let one_hour = store.visit_summary(7, T0 + HOUR, T0 + 2 * HOUR).unwrap();
    assert_eq!(one_hour.hours, [hour(h0 + 1, 2, 1)], "`to` is excluded");
    let empty = store.visit_summary(7, T0, T0).unwrap();
    assert!(empty.hours.is_empty() && empty.top.is_empty() && empty.unique_visitors == 0);
    let next_day = store.visit_summary(7, T0 + DAY, T0 + DAY + HOUR).unwrap();
    assert!(next_day.hours.is_empty() && next_day.top.is_empty());
    assert_eq!(next_day.unique_visitors, 0);
    let other = store.visit_summary(8, T0, T0 + 4 * HOUR).unwrap();
    assert_eq!(other.hours, [hour(h0 + 1, 1, 0)], "another link's apart");
    assert_eq!(browsers(&other), [("Safari".to_string(), 1)]);
}

/// Pruning removes the oldest visits recorded before a time, `limit` at a time; the counters
/// (totals, hours, days) stay.
fn prune_visits_removes_the_oldest_and_keeps_counters(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    // One write per visit, as the visit writer makes them over time.
    for (i, at) in [T0, T0 + 1, T0 + 2, T0 + DAY].into_iter().enumerate() {
        let mut one = vec![visit_at(7, at, i as u64, false, "Firefox")];
        store.record_visits(&mut one).unwrap();
    }
    let left = |store: &dyn Store| -> Vec<u64> {
        store
            .visits_page(7, None, 10)
            .unwrap()
            .items
            .iter()
            .map(|v| v.at - T0)
            .collect()
    };
    assert_eq!(store.prune_visits(T0 + DAY, 2).unwrap(), 2);
    store.sync().unwrap();
    assert_eq!(left(&*store), [2, DAY], "the oldest went first");
    assert_eq!(store.prune_visits(T0 + DAY, 100).unwrap(), 1);
    assert_eq!(left(&*store), [DAY], "a visit at `before` stays");
    assert_eq!(store.prune_visits(T0 + DAY, 100).unwrap(), 0);
    assert_eq!(store.recent_visits(7, None, 10).unwrap().items.len(), 1);
    assert_eq!(store.visit_totals(7).unwrap().visits, 4, "totals stay");
    let summary = store.visit_summary(7, T0, T0 + HOUR).unwrap();
    assert_eq!(summary.hours.iter().map(|h| h.visits).sum::<u64>(), 3);
    let day = T0 / DAY;
    assert_eq!(store.day_counts(day, day).unwrap()[0].visits, 3);
}

/// Repeated `prune_visits` calls remove every due visit of one write, oldest first, however
/// the store groups them, and then answer 0.
fn prune_visits_until_none_is_due(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let mut batch: Vec<NewVisit> = (0..4)
        .map(|i| visit_at(7, T0 + i, i, false, "Firefox"))
        .collect();
    store.record_visits(&mut batch).unwrap();
    let mut removed = 0;
    for _ in 0..4 {
        let pruned = store.prune_visits(T0 + DAY, 2).unwrap();
        if pruned == 0 {
            break;
        }
        assert!(pruned >= 1);
        removed += pruned;
    }
    assert_eq!(removed, 4, "every due visit went");
    assert_eq!(store.prune_visits(T0 + DAY, 2).unwrap(), 0);
    assert!(store.visits_page(7, None, 10).unwrap().items.is_empty());
    assert_eq!(store.visit_totals(7).unwrap().visits, 4, "totals stay");
}

/// A healthy store: checkpoint, sync and ping answer, no write fault, and the commit figures
/// add up (zeros for a store whose server groups commits).
fn running_a_healthy_store(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    store.ping().unwrap();
    store.checkpoint().unwrap();
    store.sync().unwrap();
    assert!(store.write_fault().is_none());
    fill(&*store, 6, &["900000"], T0);
    let link = created(store.create_link(&new_link(CodeChoice::Pool(6), "https://a.example/")));
    store.delete_link(&link.code, T0 + 1).unwrap();
    store.expire_links(&[link.id], T0 + 2).unwrap();
    let mut visits = vec![visit_at(link.id, T0, 1, false, "Firefox")];
    store.record_visits(&mut visits).unwrap();
    store.sync().unwrap();
    store.checkpoint().unwrap();
    store.checkpoint().unwrap();
    store.ping().unwrap();
    assert!(store.write_fault().is_none(), "no fault after writes");
    let stats = store.commit_stats();
    assert!(stats.last <= stats.total, "{stats:?}");
    if stats.flushes == 0 {
        assert_eq!(stats.total, Duration::ZERO, "{stats:?}");
    }
    assert_eq!(
        store.link_by_id(link.id).unwrap().unwrap().status,
        LinkStatus::Deleted
    );
}

/// A second instance on the store made in `dir`, checking that the store has a cluster handle
/// exactly when instances can share it; `None` for a store one process uses (whose cluster
/// cases then have nothing more to check).
fn cluster_pair(dir: &tempfile::TempDir, store: &Arc<dyn Store>) -> Option<Arc<dyn Store>> {
    let other = another_instance(dir);
    assert_eq!(
        store.cluster().is_some(),
        other.is_some(),
        "a cluster handle exactly for a store instances share"
    );
    other
}

/// A job lock holds off every other taker of the same job, on any instance, until it is
/// dropped; other jobs are not held up.
fn job_lock_excludes_other_instances(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let Some(other) = cluster_pair(&dir, &store) else {
        return;
    };
    let held = store.cluster().unwrap().job_lock("lifecycle").unwrap();
    let take = |store: &Arc<dyn Store>, name: &'static str| {
        let store = store.clone();
        let (taken, took) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let lock = store.cluster().unwrap().job_lock(name).unwrap();
            taken.send(()).unwrap();
            let _ = released.recv();
            drop(lock);
        });
        (took, release, thread)
    };
    let (took, release, thread) = take(&other, "lifecycle");
    assert_eq!(
        took.recv_timeout(Duration::from_millis(500)),
        Err(RecvTimeoutError::Timeout),
        "another instance waits while the job runs here"
    );
    let (other_job, release_other_job, other_job_thread) = take(&other, "retention");
    other_job
        .recv_timeout(Duration::from_secs(10))
        .expect("another job is not held up");
    drop(release_other_job);
    other_job_thread.join().unwrap();
    drop(held);
    took.recv_timeout(Duration::from_secs(10))
        .expect("taken once the lock is dropped");
    // Now held there: this instance waits in turn.
    let (here, release_here, here_thread) = take(&store, "lifecycle");
    assert_eq!(
        here.recv_timeout(Duration::from_millis(500)),
        Err(RecvTimeoutError::Timeout),
        "this instance waits while the job runs on the other"
    );
    drop(release);
    thread.join().unwrap();
    here.recv_timeout(Duration::from_secs(10)).expect("taken");
    drop(release_here);
    here_thread.join().unwrap();
}

/// Shared records: every instance reads what one wrote; a record untouched for `ttl` is gone
/// (a read with `touch` restarts its clock), a write clears the kind's stale records, and a
/// delete removes it.
fn shared_records_expire_and_are_seen_by_every_instance(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let Some(other) = cluster_pair(&dir, &store) else {
        return;
    };
    let records = store.cluster().unwrap().records();
    let there = other.cluster().unwrap().records();
    const TTL: u64 = 1000;
    records.put("session", b"a", b"v1", T0, TTL).unwrap();
    assert_eq!(
        there.get("session", b"a", T0 + 500, TTL, false).unwrap(),
        Some(b"v1".to_vec()),
        "seen by the other instance"
    );
    assert_eq!(records.get("session", b"b", T0, TTL, false).unwrap(), None);
    assert_eq!(records.get("batch", b"a", T0, TTL, false).unwrap(), None);
    assert_eq!(
        records.get("session", b"a", T0 + TTL, TTL, false).unwrap(),
        Some(b"v1".to_vec()),
        "touched exactly `ttl` ago: still there"
    );
    assert_eq!(
        records
            .get("session", b"a", T0 + TTL + 1, TTL, false)
            .unwrap(),
        None,
        "untouched for longer than `ttl`"
    );
    // A read with touch restarts the clock; one without does not.
    assert!(there
        .get("session", b"a", T0 + 900, TTL, true)
        .unwrap()
        .is_some());
    assert!(records
        .get("session", b"a", T0 + 1500, TTL, false)
        .unwrap()
        .is_some());
    assert!(records
        .get("session", b"a", T0 + 1901, TTL, false)
        .unwrap()
        .is_none());
    // A write replaces the value and touches it.
    there.put("session", b"a", b"v2", T0 + 2000, TTL).unwrap();
    assert_eq!(
        records.get("session", b"a", T0 + 2500, TTL, false).unwrap(),
        Some(b"v2".to_vec())
    );
    // A write of the kind clears its records untouched for `ttl`.
    let long = 100 * DAY;
    assert!(records
        .get("session", b"a", T0 + 5000, long, false)
        .unwrap()
        .is_some());
    records.put("batch", b"x", b"1", T0 + 5000, TTL).unwrap();
    assert!(
        records
            .get("session", b"a", T0 + 5000, long, false)
            .unwrap()
            .is_some(),
        "another kind's write leaves it"
    );
    records.put("session", b"c", b"3", T0 + 5000, TTL).unwrap();
    assert_eq!(
        records
            .get("session", b"a", T0 + 5000, long, false)
            .unwrap(),
        None,
        "gone with the kind's next write"
    );
    there.delete("session", b"c").unwrap();
    assert_eq!(
        records.get("session", b"c", T0 + 5000, TTL, false).unwrap(),
        None
    );
    there.delete("session", b"nothing").unwrap();
    assert_eq!(
        records.get("batch", b"x", T0 + 5000, TTL, false).unwrap(),
        Some(b"1".to_vec())
    );
}

/// `watch` tells this process's handler the code of a link another instance changed.
fn watch_reports_links_other_instances_change(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let Some(other) = cluster_pair(&dir, &store) else {
        return;
    };
    created(store.create_link(&new_link(
        CodeChoice::Custom("watch1".into()),
        "https://a.example/",
    )));
    let (told, changes) = mpsc::channel();
    let told = Mutex::new(told);
    store.cluster().unwrap().watch(Box::new(move |change| {
        let _ = told.lock().unwrap().send(change);
    }));
    // The handler listens from some moment after `watch` returns: the other instance changes
    // the link until one change is told (bounded: 50 tries, 200 ms each).
    let mut seen = false;
    for n in 0..50u64 {
        let patch = LinkPatch {
            title: Some(Some(format!("t{n}"))),
            ..LinkPatch::default()
        };
        other.update_link("watch1", &patch, T0 + 1 + n).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_millis(200);
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match changes.recv_timeout(left) {
                Ok(StoreChange::Code(code)) => {
                    assert_eq!(code, "watch1");
                    seen = true;
                    break;
                }
                Ok(StoreChange::All | StoreChange::Accounts | StoreChange::Domains) => {}
                Err(_) => break,
            }
        }
        if seen {
            break;
        }
    }
    assert!(seen, "no change told within 10 s");
    // Once listening, each change of the other instance is told.
    while changes.try_recv().is_ok() {}
    other.delete_link("watch1", T0 + 100).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline
            .checked_duration_since(std::time::Instant::now())
            .expect("the delete told within 10 s");
        if changes.recv_timeout(left).expect("the delete told")
            == StoreChange::Code("watch1".into())
        {
            break;
        }
    }
}

/// Closed, a store accepts no more writes.
fn close_stops_writes(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    fill(&*store, 6, &["910000", "910001"], T0);
    created(store.create_link(&new_link(
        CodeChoice::Custom("close1".into()),
        "https://a.example/",
    )));
    store.close().unwrap();
    let patch = LinkPatch {
        url: Some("https://b.example/".into()),
        ..LinkPatch::default()
    };
    let mut failed = Vec::new();
    let mut check = |what: &str, outcome: Result<(), StoreError>| {
        if outcome.is_ok() {
            failed.push(what.to_string());
        }
    };
    check(
        "update_link",
        store.update_link("close1", &patch, T0 + 1).map(drop),
    );
    check(
        "create_link (custom)",
        store
            .create_link(&new_link(
                CodeChoice::Custom("close2".into()),
                "https://c.example/",
            ))
            .map(drop),
    );
    check(
        "create_link (pooled)",
        store
            .create_link(&new_link(CodeChoice::Pool(6), "https://d.example/"))
            .map(drop),
    );
    check("meta_init", store.meta_init("k", b"v").map(drop));
    let mut visits = vec![visit_at(1, T0, 1, false, "Firefox")];
    check("record_visits", store.record_visits(&mut visits));
    check(
        "add_lead",
        store.add_lead(lead(1, T0, "+100000001")).map(drop),
    );
    check(
        "enqueue",
        store.enqueue(&[event("w", "link:1", T0)]).map(drop),
    );
    assert!(failed.is_empty(), "accepted after close: {failed:?}");
}

// ---- the webhook outbox ----

fn event(webhook: &str, key: &str, at: u64) -> NewOutboxItem {
    NewOutboxItem {
        webhook: webhook.into(),
        event: "link.created".into(),
        key: key.into(),
        body: format!("{{\"key\":\"{key}\",\"at\":{at}}}").into_bytes(),
        created_at: at,
    }
}

fn answered(at: u64, status: u16) -> DeliveryAttempt {
    DeliveryAttempt {
        at,
        status: Some(status),
        error: None,
    }
}

fn item_ids(items: &[OutboxItem]) -> Vec<u64> {
    items.iter().map(|i| i.id).collect()
}

/// A second handle on the same store, as after a restart: another instance on the same
/// database for a store instances share, else the store closed and opened again.
fn reopened(make: Make, dir: &tempfile::TempDir, store: Arc<dyn Store>) -> Arc<dyn Store> {
    if let Some(other) = another_instance(dir) {
        return other;
    }
    store.close().unwrap();
    drop(store);
    make(dir)
}

/// Ids grow across batches in the order given; an item reads back as it was queued, due at
/// its creation, never attempted.
fn outbox_ids_grow_and_items_read_back(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    assert_eq!(store.enqueue(&[]).unwrap(), Vec::<u64>::new());
    let first = store
        .enqueue(&[
            event("w1", "link:1", T0),
            event("w1", "link:2", T0),
            event("w2", "link:1", T0 + 1),
        ])
        .unwrap();
    assert_eq!(first.len(), 3);
    assert!(first.windows(2).all(|w| w[0] < w[1]), "{first:?}");
    let second = store.enqueue(&[event("w1", "link:3", T0 + 2)]).unwrap();
    assert!(second[0] > first[2], "{first:?} then {second:?}");
    assert_eq!(store.outbox_depth().unwrap(), 4);
    let mut binary = event("w3", "visits", T0 + 3);
    binary.event = "visit".into();
    binary.body = vec![0, 0xff, b'{', 0x80];
    let [binary_id] = store.enqueue(&[binary.clone()]).unwrap()[..] else {
        panic!("one id for one item");
    };
    let taken = store.take_due(T0 + 10, 60_000, 100).unwrap();
    assert_eq!(
        item_ids(&taken),
        [first.clone(), second, vec![binary_id]].concat()
    );
    let item = taken.last().unwrap();
    assert_eq!(
        *item,
        OutboxItem {
            id: binary_id,
            webhook: "w3".into(),
            event: "visit".into(),
            key: "visits".into(),
            body: binary.body,
            created_at: T0 + 3,
            attempts: 0,
            next_at: T0 + 3,
            last_error: None,
        },
        "the body comes back byte for byte"
    );
    assert_eq!(taken[0].body, event("w1", "link:1", T0).body);
}

/// An item is taken once it is due and while its lease is free; a take within the lease gets
/// nothing, one after it gets the item again. At most `limit` are taken, soonest due first.
fn take_due_respects_next_at_and_leases(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let [late] = store.enqueue(&[event("w", "link:1", T0 + 100)]).unwrap()[..] else {
        panic!("one id");
    };
    assert!(
        store.take_due(T0 + 99, 1000, 10).unwrap().is_empty(),
        "not due"
    );
    assert_eq!(
        item_ids(&store.take_due(T0 + 100, 1000, 10).unwrap()),
        [late]
    );
    assert!(
        store.take_due(T0 + 500, 1000, 10).unwrap().is_empty(),
        "leased"
    );
    assert!(
        store.take_due(T0 + 1099, 1000, 10).unwrap().is_empty(),
        "leased until its end"
    );
    assert_eq!(
        item_ids(&store.take_due(T0 + 1100, 1000, 10).unwrap()),
        [late],
        "taken again once the lease ended"
    );
    let early = store
        .enqueue(&[
            event("w", "link:2", T0 + 3),
            event("w", "link:3", T0 + 1),
            event("w", "link:4", T0 + 2),
        ])
        .unwrap();
    assert!(store.take_due(T0 + 10, 1000, 0).unwrap().is_empty());
    assert_eq!(
        item_ids(&store.take_due(T0 + 10, 1000, 2).unwrap()),
        [early[1], early[2]],
        "soonest due first, at most the limit"
    );
    assert_eq!(
        item_ids(&store.take_due(T0 + 10, 1000, 2).unwrap()),
        [early[0]]
    );
    assert!(store.take_due(T0 + 10, 1000, 2).unwrap().is_empty());
    assert_eq!(store.outbox_depth().unwrap(), 4, "leased items count");
}

/// A key's items go out one at a time in id order: a later one is not taken while an earlier
/// one is leased or waiting for its retry, whatever their times; other keys go on.
fn outbox_keys_go_out_in_order(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let a = store
        .enqueue(&[event("w", "link:1", T0), event("w", "link:2", T0)])
        .unwrap();
    let more = store
        .enqueue(&[event("w", "link:1", T0), event("other", "link:1", T0)])
        .unwrap();
    let (a1, b1, a2, other) = (a[0], a[1], more[0], more[1]);
    assert_eq!(
        item_ids(&store.take_due(T0, 60_000, 10).unwrap()),
        [a1, b1, other],
        "the same key of another webhook is another key"
    );
    assert!(store.take_due(T0 + 1, 60_000, 10).unwrap().is_empty());
    // a1 fails: a2 still waits behind it, leased or not.
    assert!(store.retry(a1, &answered(T0 + 5, 500), T0 + 1000).unwrap());
    assert!(store.take_due(T0 + 10, 60_000, 10).unwrap().is_empty());
    assert!(store.delivered(b1, &answered(T0 + 11, 200)).unwrap());
    assert!(store.delivered(other, &answered(T0 + 11, 204)).unwrap());
    let retried = store.take_due(T0 + 1000, 60_000, 10).unwrap();
    assert_eq!(
        item_ids(&retried),
        [a1],
        "a1 again at its retry, a2 not yet"
    );
    assert_eq!(
        (retried[0].attempts, retried[0].next_at),
        (1, T0 + 1000),
        "one more attempt, its next one moved"
    );
    assert_eq!(retried[0].last_error.as_deref(), Some("HTTP 500"));
    // Queued while the key's head is out: behind a2.
    let [a3] = store.enqueue(&[event("w", "link:1", T0 + 1001)]).unwrap()[..] else {
        panic!("one id");
    };
    assert!(store.delivered(a1, &answered(T0 + 1002, 200)).unwrap());
    assert_eq!(
        item_ids(&store.take_due(T0 + 1002, 60_000, 10).unwrap()),
        [a2]
    );
    assert!(store.give_up(a2, &answered(T0 + 1003, 410)).unwrap());
    assert_eq!(
        item_ids(&store.take_due(T0 + 1003, 60_000, 10).unwrap()),
        [a3]
    );
    assert!(store.delivered(a3, &answered(T0 + 1004, 200)).unwrap());
    assert_eq!(store.outbox_depth().unwrap(), 0);
    assert!(store.take_due(T0 + 100_000, 60_000, 10).unwrap().is_empty());
}

/// Settling logs the attempt: `retry` keeps the item, `delivered` and `give_up` remove it; an
/// item not there settles as `false` and logs nothing. The log reads newest first, by
/// webhook or all together, every outcome or only the failures.
fn settling_logs_each_attempt(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let queued = store
        .enqueue(&[event("w1", "link:1", T0), event("w2", "link:9", T0)])
        .unwrap();
    let (one, nine) = (queued[0], queued[1]);
    assert_eq!(store.take_due(T0, 60_000, 10).unwrap().len(), 2);
    let timeout = DeliveryAttempt {
        at: T0 + 1,
        status: None,
        error: Some("timed out after 10 s".into()),
    };
    assert!(store.retry(one, &timeout, T0 + 10).unwrap());
    assert!(store.retry(one, &answered(T0 + 11, 503), T0 + 20).unwrap());
    assert_eq!(store.outbox_depth().unwrap(), 2, "a retried item stays");
    assert!(store.delivered(one, &answered(T0 + 21, 200)).unwrap());
    assert!(store.give_up(nine, &answered(T0 + 22, 404)).unwrap());
    assert_eq!(store.outbox_depth().unwrap(), 0);
    assert!(!store.delivered(one, &answered(T0 + 23, 200)).unwrap());
    assert!(!store.retry(one, &answered(T0 + 23, 500), T0 + 30).unwrap());
    assert!(!store.give_up(12345, &answered(T0 + 23, 500)).unwrap());

    let all = store.deliveries(None, false, 100).unwrap();
    let seen: Vec<(u64, DeliveryOutcome, u32, Option<u16>)> = all
        .iter()
        .map(|r| (r.id, r.outcome, r.attempts, r.status))
        .collect();
    assert_eq!(
        seen,
        [
            (nine, DeliveryOutcome::GaveUp, 1, Some(404)),
            (one, DeliveryOutcome::Delivered, 3, Some(200)),
            (one, DeliveryOutcome::Failed, 2, Some(503)),
            (one, DeliveryOutcome::Failed, 1, None),
        ],
        "newest first; nothing logged for the items that were not there"
    );
    assert_eq!(
        all[3],
        DeliveryRecord {
            id: one,
            webhook: "w1".into(),
            event: "link.created".into(),
            key: "link:1".into(),
            at: T0 + 1,
            attempts: 1,
            outcome: DeliveryOutcome::Failed,
            status: None,
            error: Some("timed out after 10 s".into()),
        }
    );
    assert_eq!(all[2].error.as_deref(), Some("HTTP 503"));
    assert_eq!(all[1].error, None);
    assert_eq!(store.deliveries(None, false, 2).unwrap(), all[..2]);
    assert_eq!(store.deliveries(None, false, 0).unwrap(), []);
    let failures = store.deliveries(None, true, 100).unwrap();
    assert_eq!(failures, [all[0].clone(), all[2].clone(), all[3].clone()]);
    assert_eq!(store.deliveries(Some("w1"), false, 100).unwrap(), all[1..]);
    assert_eq!(
        store.deliveries(Some("w1"), true, 1).unwrap(),
        [all[2].clone()]
    );
    assert_eq!(store.deliveries(Some("w2"), false, 100).unwrap(), all[..1]);
    assert_eq!(store.deliveries(Some("w"), false, 100).unwrap(), []);
}

/// The log keeps the last `DELIVERY_LOG_KEEP` records of each webhook; another webhook's
/// records are not touched.
fn the_delivery_log_is_bounded(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let queued = store
        .enqueue(&[event("busy", "link:1", T0), event("quiet", "link:1", T0)])
        .unwrap();
    assert!(store.retry(queued[1], &answered(T0, 500), T0).unwrap());
    let writes = DELIVERY_LOG_KEEP as u64 + 5;
    for n in 1..=writes {
        assert!(store.retry(queued[0], &answered(T0 + n, 500), T0).unwrap());
    }
    let busy = store.deliveries(Some("busy"), false, usize::MAX).unwrap();
    assert_eq!(busy.len(), DELIVERY_LOG_KEEP);
    assert_eq!(busy[0].at, T0 + writes, "the newest kept");
    assert_eq!(
        busy[DELIVERY_LOG_KEEP - 1].at,
        T0 + 6,
        "the oldest five gone"
    );
    assert_eq!(
        store
            .deliveries(Some("quiet"), false, usize::MAX)
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store.deliveries(None, true, usize::MAX).unwrap().len(),
        DELIVERY_LOG_KEEP + 1
    );
}

/// Items, their attempts, their order per key and the log outlive the process: a restart
/// (or another instance) finds them, and new ids follow the old ones.
fn the_outbox_survives_a_restart(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let queued = store
        .enqueue(&[
            event("w", "link:1", T0),
            event("w", "link:1", T0),
            event("w", "link:2", T0),
        ])
        .unwrap();
    assert_eq!(store.take_due(T0, 1000, 10).unwrap().len(), 2);
    assert!(store
        .retry(queued[0], &answered(T0 + 1, 502), T0 + 50)
        .unwrap());
    assert!(store.delivered(queued[2], &answered(T0 + 2, 200)).unwrap());
    let log = store.deliveries(None, false, 10).unwrap();
    let store = reopened(make, &dir, store);
    assert_eq!(store.outbox_depth().unwrap(), 2);
    assert_eq!(store.deliveries(None, false, 10).unwrap(), log);
    let taken = store.take_due(T0 + 50, 1000, 10).unwrap();
    assert_eq!(item_ids(&taken), [queued[0]], "the key's order holds");
    assert_eq!(
        (taken[0].attempts, taken[0].last_error.as_deref()),
        (1, Some("HTTP 502"))
    );
    let later = store.enqueue(&[event("w", "link:3", T0 + 60)]).unwrap();
    assert!(later[0] > queued[2], "{later:?} after {queued:?}");
    assert!(store.delivered(queued[0], &answered(T0 + 61, 200)).unwrap());
    assert_eq!(
        item_ids(&store.take_due(T0 + 61, 1000, 10).unwrap()),
        [queued[1], later[0]]
    );
}

/// Senders taking at once, on one instance or several, never take one item together, and
/// never take an item of a key before the one before it is settled; items queued to the same
/// keys meanwhile, from another instance, are all taken in their turn (no key is left without
/// its head).
fn concurrent_senders_take_each_item_once(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let other = cluster_pair(&dir, &store).unwrap_or_else(|| store.clone());
    const KEYS: usize = 12;
    let batch = |n: usize| -> Vec<NewOutboxItem> {
        (0..n * KEYS)
            .map(|at| event("w", &format!("link:{}", at % KEYS), T0))
            .collect()
    };
    // Each key's ids in order, extended by the producer under the lock while it queues, so
    // that a sender never takes an item this map does not know yet.
    let by_key = Arc::new(Mutex::new(vec![Vec::new(); KEYS]));
    let record = |by_key: &mut Vec<Vec<u64>>, queued: &[u64]| {
        for (at, id) in queued.iter().enumerate() {
            by_key[at % KEYS].push(*id);
        }
    };
    record(
        &mut by_key.lock().unwrap(),
        &store.enqueue(&batch(2)).unwrap(),
    );
    let settled = Arc::new(Mutex::new(std::collections::HashSet::new()));
    let producing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let producer = {
        let (other, by_key, producing) = (other.clone(), by_key.clone(), producing.clone());
        std::thread::spawn(move || {
            // Keys are often empty by now: queuing races with the removal of their last item.
            for _ in 0..40 {
                let mut by_key = by_key.lock().unwrap();
                record(&mut by_key, &other.enqueue(&batch(1)).unwrap());
                drop(by_key);
                std::thread::sleep(Duration::from_millis(1));
            }
            producing.store(false, std::sync::atomic::Ordering::SeqCst);
        })
    };
    let senders: Vec<_> = (0..4)
        .map(|n| {
            let store = if n % 2 == 0 {
                store.clone()
            } else {
                other.clone()
            };
            let (by_key, settled, producing) = (by_key.clone(), settled.clone(), producing.clone());
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                let mut idle = 0;
                while idle < 50 || producing.load(std::sync::atomic::Ordering::SeqCst) {
                    let taken = store.take_due(T0, 600_000, 5).unwrap();
                    if taken.is_empty() {
                        idle += 1;
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                    idle = 0;
                    for item in taken {
                        let by_key = by_key.lock().unwrap();
                        let key = by_key.iter().find(|ids| ids.contains(&item.id)).unwrap();
                        let mut settled = settled.lock().unwrap();
                        for earlier in key.iter().take_while(|id| **id != item.id) {
                            assert!(
                                settled.contains(earlier),
                                "{} taken before {earlier} was settled",
                                item.id
                            );
                        }
                        // Marked before the store hears of it: the next of its key can only
                        // be taken after that.
                        assert!(settled.insert(item.id), "{} taken twice", item.id);
                        drop((settled, by_key));
                        assert!(store.delivered(item.id, &answered(T0, 200)).unwrap());
                        mine.push(item.id);
                    }
                }
                mine
            })
        })
        .collect();
    producer.join().unwrap();
    let mut all: Vec<u64> = senders
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    all.sort_unstable();
    let mut expected: Vec<u64> = by_key.lock().unwrap().concat();
    expected.sort_unstable();
    assert_eq!(expected.len(), 42 * KEYS);
    assert_eq!(all, expected, "every item taken once");
    assert_eq!(store.outbox_depth().unwrap(), 0);
}

fn domain(host: &str) -> vshortlink::model::Domain {
    let mut domain = vshortlink::model::Domain::default_of(host);
    domain.id = 99;
    domain.created_at = T0;
    domain.updated_at = T0;
    domain
}

/// Domains (SPEC §26): added with ids the store gives (never 0, never twice, even after a
/// delete), one per host; written whole over their id; deleted; in use while a link that is
/// not archived is on them.
fn domains_are_records_with_ids_of_their_own(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    assert!(store.domains().unwrap().is_empty());
    let DomainAdded::Added(a) = store.add_domain(&domain("a.example")).unwrap() else {
        panic!("added");
    };
    let DomainAdded::Added(b) = store.add_domain(&domain("b.example")).unwrap() else {
        panic!("added");
    };
    assert!(a.id >= 1 && b.id > a.id, "{} {}", a.id, b.id);
    assert_eq!(
        store.add_domain(&domain("a.example")).unwrap(),
        DomainAdded::Exists
    );
    // Written whole over its id; another id's host is refused.
    let mut patched = a.clone();
    patched.root_url = Some("https://a.example/root".into());
    assert!(store.put_domain(&patched).unwrap());
    let mut clash = b.clone();
    clash.host = "a.example".into();
    assert!(!store.put_domain(&clash).unwrap());
    // The default domain's settings are a record of id 0.
    let mut default = domain("sl.test");
    default.id = 0;
    default.not_found_url = Some("https://sl.test/missing".into());
    assert!(store.put_domain(&default).unwrap());
    let mut all = store.domains().unwrap();
    all.sort_by_key(|d| d.id);
    assert_eq!(all.len(), 3);
    assert_eq!(all[0], default);
    assert_eq!(all[1], patched);
    // In use while a link on it is not archived.
    assert!(!store.domain_in_use(b.id).unwrap());
    let mut on_b = new_link(CodeChoice::Custom("onb".into()), "https://b.example/x");
    on_b.domain = b.id;
    let link = created(store.create_link(&on_b));
    assert_eq!(link.domain, b.id);
    assert!(store.domain_in_use(b.id).unwrap());
    assert!(!store.domain_in_use(a.id).unwrap());
    // Deleted; its id is never given again.
    assert!(store.delete_domain(a.id).unwrap());
    assert!(!store.delete_domain(a.id).unwrap());
    let DomainAdded::Added(c) = store.add_domain(&domain("a.example")).unwrap() else {
        panic!("added again");
    };
    assert!(c.id > b.id, "ids are never reused: {} after {}", c.id, b.id);
}

/// A code is unique per domain: the same custom code on two domains is two links, each read,
/// resolved, changed and deleted by its own key; pooled codes are one pool for every domain;
/// dedup is per domain; `may_exist` never denies a key that exists.
fn codes_are_unique_per_domain(make: Make) {
    use vshortlink::model::code_key;
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let on = |code: CodeChoice, url: &str, domain: u16| {
        let mut new = new_link(code, url);
        new.domain = domain;
        new
    };
    let home = created(store.create_link(&on(
        CodeChoice::Custom("sale".into()),
        "https://home.example/",
        0,
    )));
    let away = created(store.create_link(&on(
        CodeChoice::Custom("sale".into()),
        "https://away.example/",
        3,
    )));
    assert_ne!(home.id, away.id);
    assert_eq!(away.key(), "sale@3");
    match store.create_link(&on(
        CodeChoice::Custom("sale".into()),
        "https://x.example/",
        3,
    )) {
        Err(StoreError::CodeTaken(_)) => {}
        other => panic!("the same code twice on one domain: {other:?}"),
    }
    assert_eq!(
        store.resolve("sale").unwrap().unwrap().url,
        "https://home.example/"
    );
    assert_eq!(
        store.resolve("sale@3").unwrap().unwrap().url,
        "https://away.example/"
    );
    assert!(store.resolve("sale@4").unwrap().is_none());
    assert!(store.may_exist("sale@3"));
    assert_eq!(store.link_by_code("sale@3").unwrap().unwrap().id, away.id);
    let patch = LinkPatch {
        url: Some("https://away.example/2".into()),
        ..LinkPatch::default()
    };
    store.update_link("sale@3", &patch, T0 + 1).unwrap();
    assert_eq!(
        store.resolve("sale").unwrap().unwrap().url,
        "https://home.example/"
    );
    store.delete_link("sale@3", T0 + 2).unwrap();
    assert!(store.resolve("sale@3").unwrap().is_none());
    assert!(store.resolve("sale").unwrap().is_some());
    // One pool for every domain: a code taken on one is gone for all.
    fill(&*store, 6, &["100000", "100001"], T0);
    let pooled = created(store.create_link(&on(CodeChoice::Pool(6), "https://p.example/", 3)));
    assert_eq!(pooled.code, "100000");
    let again = store
        .create_link(&on(CodeChoice::Pool(6), "https://p.example/", 3))
        .unwrap();
    assert_eq!(again.link().id, pooled.id, "dedup on one domain");
    let home_pooled = created(store.create_link(&on(CodeChoice::Pool(6), "https://p.example/", 0)));
    assert_eq!(
        home_pooled.code, "100001",
        "no dedup across domains, no code twice"
    );
    assert_eq!(
        store
            .dedup_target("default", 3, 6, "https://p.example/")
            .unwrap()
            .map(|l| l.id),
        Some(pooled.id)
    );
    // A code some domain owns is not pooled again.
    let added = store
        .pool_add(&PoolBatch {
            length: 4,
            codes: vec!["sale".into(), "salf".into()],
            score: T0,
            now: T0,
            state: None,
            shuffle: false,
        })
        .unwrap();
    assert_eq!(added.added, 1, "`sale` is owned (on two domains)");
    let custom = created(store.create_link(&on(
        CodeChoice::Custom("only".into()),
        "https://o.example/",
        5,
    )));
    let added = store
        .pool_add(&PoolBatch {
            length: 4,
            codes: vec!["only".into()],
            score: T0,
            now: T0,
            state: None,
            shuffle: false,
        })
        .unwrap();
    assert_eq!(added.added, 0, "`only` is owned on domain 5 alone");
    assert_eq!(custom.key(), code_key(5, "only"));
    // Imported records keep their domain.
    let mut record = import_record(700, "imp777", "https://i.example/", LinkStatus::Active);
    record.domain = 3;
    let imported = store.import_links(&[record]).unwrap();
    assert!(matches!(&imported[0], Imported::Created(l) if l.domain == 3));
    assert_eq!(
        store.resolve("imp777@3").unwrap().unwrap().url,
        "https://i.example/"
    );
    assert!(store.resolve("imp777").unwrap().is_none());
}

macro_rules! backend {
    ($backend:ident; $($case:ident),+ $(,)?) => {
        mod $backend {
            $(
                #[test]
                fn $case() {
                    // Skipped (with a message) where the backend's server is not installed.
                    if super::$backend(&tempfile::tempdir().unwrap()).is_some() {
                        super::$case(|dir| super::$backend(dir).expect("the backend"));
                    }
                }
            )+
        }
    };
}

/// Every case, on every backend.
/// What a store reports holding beside its bounds (`vsl_store_memory_bytes{part}`): each part
/// named once, the same parts before and after writes (a metric's labels do not come and go),
/// and every value a gauge can carry. sled names its page table and cache capacity; a
/// database server holds neither and names nothing.
fn memory_held_names_each_part_once_and_keeps_them(make: Make) {
    let dir = tempfile::tempdir().expect("dir");
    let store = make(&dir);
    let names = |store: &dyn Store| {
        let held = store.memory_held();
        assert!(
            held.iter().all(|(_, bytes)| *bytes <= i64::MAX as u64),
            "{held:?}"
        );
        let mut names: Vec<&str> = held.iter().map(|(name, _)| *name).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "a part named twice: {held:?}");
        names
    };
    let before = names(&*store);
    for i in 0..50 {
        created(store.create_link(&new_link(
            CodeChoice::Custom(format!("mem{i:03}")),
            "https://example.com/m",
        )));
    }
    store.sync().expect("sync");
    assert_eq!(names(&*store), before);
}

/// Plans' usage counters (SPEC §25): set once, taken never past their limit — all or nothing,
/// or as much as fits — exactly under concurrency and, on a shared store, across instances;
/// released never below zero; cleared to be counted again.
fn quotas_are_taken_exactly_and_never_past_their_limit(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    assert_eq!(store.quota_get("links/red/2027-01").unwrap(), None);
    assert_eq!(store.quota_init("links/red/2027-01", 3).unwrap(), 3);
    assert_eq!(
        store.quota_init("links/red/2027-01", 9).unwrap(),
        3,
        "set once"
    );
    let taken = store.quota_take("links/red/2027-01", 1, 5, false).unwrap();
    assert_eq!((taken.granted, taken.used), (1, 4));
    // All or nothing: 2 do not fit under 5, nothing is taken.
    let refused = store.quota_take("links/red/2027-01", 2, 5, false).unwrap();
    assert_eq!((refused.granted, refused.used), (0, 4));
    // As much as fits.
    let part = store.quota_take("links/red/2027-01", 7, 5, true).unwrap();
    assert_eq!((part.granted, part.used), (1, 5));
    store.quota_release("links/red/2027-01", 2).unwrap();
    assert_eq!(store.quota_get("links/red/2027-01").unwrap(), Some(3));
    store.quota_release("links/red/2027-01", 10).unwrap();
    assert_eq!(store.quota_get("links/red/2027-01").unwrap(), Some(0));
    // Releasing a counter never set leaves it unset (it is counted when first needed).
    store.quota_release("active/blue", 1).unwrap();
    assert_eq!(store.quota_get("active/blue").unwrap(), None);
    // 40 takes at once against 10 left: exactly 10, split over two instances when the store
    // is shared.
    store.quota_init("active/red", 90).unwrap();
    let other = another_instance(&dir);
    let granted: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..40)
            .map(|i| {
                let on: &dyn Store = match (&other, i % 2) {
                    (Some(other), 1) => &**other,
                    _ => &*store,
                };
                s.spawn(move || on.quota_take("active/red", 1, 100, false).unwrap().granted)
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(granted, 10);
    assert_eq!(store.quota_get("active/red").unwrap(), Some(100));
    store.quota_clear().unwrap();
    assert_eq!(store.quota_get("active/red").unwrap(), None);
    assert_eq!(store.quota_get("links/red/2027-01").unwrap(), None);
}

macro_rules! contract {
    ($($case:ident),+ $(,)?) => {
        backend!(sled; $($case),+);
        backend!(postgres; $($case),+);
    };
}

fn team_record(slug: &str) -> AccountRecord {
    AccountRecord::Team(Team {
        slug: slug.into(),
        name: slug.into(),
        plan: None,
        spaces: vec![],
        created_at: T0,
    })
}

fn account_writes_name_their_version(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let start = store.accounts().unwrap();
    assert!(start.records.is_empty());
    let v1 = store
        .write_accounts(start.version, &AccountWrite::put(team_record("red")))
        .unwrap()
        .expect("the first write at the version read");
    assert_eq!(v1, start.version + 1);
    // A write planned at the old version is refused whole, and writes nothing.
    let stale = AccountWrite {
        put: vec![team_record("blue")],
        delete: vec![team_record("red").address()],
    };
    assert_eq!(store.write_accounts(start.version, &stale).unwrap(), None);
    let now = store.accounts().unwrap();
    assert_eq!(now.version, v1);
    assert_eq!(now.records, vec![team_record("red").encode()]);
    // At the current version: applied whole.
    let v2 = store.write_accounts(v1, &stale).unwrap().expect("current");
    let after = store.accounts().unwrap();
    assert_eq!(after.version, v2);
    assert_eq!(after.records, vec![team_record("blue").encode()]);
}

fn account_writes_race_and_one_wins(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let version = store.accounts().unwrap().version;
    let wins: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|n| {
                let store = store.clone();
                s.spawn(move || {
                    let write = AccountWrite::put(team_record(&format!("t{n}")));
                    store.write_accounts(version, &write).unwrap().is_some()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| usize::from(h.join().unwrap()))
            .sum()
    });
    assert_eq!(wins, 1, "one write per version");
    assert_eq!(store.accounts().unwrap().records.len(), 1);
}

fn audit_entries_page_newest_first_and_prune(make: Make) {
    let dir = tempfile::tempdir().unwrap();
    let store = make(&dir);
    let entry = |at: u64, action: &str, team: Option<&str>| AuditEntry {
        id: 0,
        at,
        actor: "user:a".into(),
        action: action.into(),
        target: "link:x".into(),
        ip: "127.0.0.1".into(),
        team: team.map(str::to_string),
        count: (action == "link.created").then_some(3),
    };
    store
        .audit_append(&[
            entry(T0, "link.created", Some("red")),
            entry(T0 + 1, "link.deleted", Some("blue")),
            entry(T0 + 2, "sign_in", None),
        ])
        .unwrap();
    store
        .audit_append(&[entry(T0 + DAY, "link.deleted", Some("red"))])
        .unwrap();
    let all = store
        .audit(&AuditQuery {
            limit: 10,
            ..AuditQuery::default()
        })
        .unwrap();
    let ats: Vec<u64> = all.entries.iter().map(|e| e.at).collect();
    assert_eq!(ats, vec![T0 + DAY, T0 + 2, T0 + 1, T0]);
    assert!(all.entries.windows(2).all(|w| w[0].id > w[1].id));
    assert_eq!(all.entries[3].count, Some(3));
    let red = store
        .audit(&AuditQuery {
            team: Some("red".into()),
            limit: 1,
            ..AuditQuery::default()
        })
        .unwrap();
    assert_eq!(red.entries.len(), 1);
    assert_eq!(red.entries[0].at, T0 + DAY);
    let rest = store
        .audit(&AuditQuery {
            team: Some("red".into()),
            before: red.next,
            limit: 10,
            ..AuditQuery::default()
        })
        .unwrap();
    assert_eq!(
        rest.entries.iter().map(|e| e.at).collect::<Vec<_>>(),
        vec![T0]
    );
    let window = store
        .audit(&AuditQuery {
            from: Some(T0 + 1),
            to: Some(T0 + 3),
            limit: 10,
            ..AuditQuery::default()
        })
        .unwrap();
    assert_eq!(window.entries.len(), 2);
    assert_eq!(store.audit_prune(T0 + 2).unwrap(), 2);
    let left = store
        .audit(&AuditQuery {
            limit: 10,
            ..AuditQuery::default()
        })
        .unwrap();
    assert_eq!(left.entries.len(), 2);
}

contract!(
    domains_are_records_with_ids_of_their_own,
    codes_are_unique_per_domain,
    account_writes_name_their_version,
    account_writes_race_and_one_wins,
    audit_entries_page_newest_first_and_prune,
    memory_held_names_each_part_once_and_keeps_them,
    pool_takes_lowest_code_once,
    cooling_codes_wait,
    dedup_returns_the_existing_generated_link,
    custom_codes,
    update_and_delete,
    expire_then_recycle,
    expire_links_takes_only_due_active_links,
    list_with_cursor_and_search,
    visits_are_counted_and_listed,
    meta_keeps_the_first_value,
    tls_values_are_kept_by_key,
    import_keeps_records_and_is_idempotent,
    submitted_creates_are_answered_once_each,
    options_travel_with_the_link,
    claims_never_pass_a_cap,
    quotas_are_taken_exactly_and_never_past_their_limit,
    leads_are_kept_by_link,
    gates_travel_with_the_link,
    the_review_queue_takes_each_link_once,
    may_exist_never_denies_a_code_that_existed,
    retire_link_takes_a_link_out_of_recycling,
    queue_reviews_queues_each_link_once,
    renew_review_extends_a_lease,
    pool_below_agrees_with_pool_counts,
    pool_levels_do_not_depend_on_earlier_questions,
    pool_peek_shows_the_order_codes_are_taken_in,
    strategy_state_is_what_pool_add_wrote,
    imported_visits_keep_their_ids,
    visit_summary_counts_by_hour_within_the_range,
    prune_visits_removes_the_oldest_and_keeps_counters,
    prune_visits_until_none_is_due,
    running_a_healthy_store,
    job_lock_excludes_other_instances,
    shared_records_expire_and_are_seen_by_every_instance,
    watch_reports_links_other_instances_change,
    outbox_ids_grow_and_items_read_back,
    take_due_respects_next_at_and_leases,
    outbox_keys_go_out_in_order,
    settling_logs_each_attempt,
    the_delivery_log_is_bounded,
    the_outbox_survives_a_restart,
    concurrent_senders_take_each_item_once,
    close_stops_writes,
);
