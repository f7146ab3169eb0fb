//! Visit storage, queue and retention in process, where time and scheduling can be controlled:
//! a 100k-visit CSV export streamed page by page, queue overflow that drops and counts, and
//! retention that prunes old visits only while every counter stays.

use std::sync::Arc;

#[path = "common/postgres.rs"]
mod pg;

use pg::test_store;

use tokio_stream::StreamExt;
use vshortlink::clock::{Clock, ManualClock};
use vshortlink::config::Config;
use vshortlink::model::{NewVisit, Visit};
use vshortlink::store::Store;
use vshortlink::visits::recorder::JournalOptions;
use vshortlink::visits::{Recorder, Statistics};
use vshortlink::web::csv::{csv_body, CSV_PAGE};

const DAY: u64 = 86_400_000;
const T0: u64 = 1_800_000_000_000;

fn store(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    test_store(dir.path())
}

fn new_visit(link_id: u64, at: u64, i: u64) -> NewVisit {
    NewVisit {
        visit: Visit {
            link_id,
            code: "abcdef".into(),
            at,
            client_id: format!("{i:040x}").into(),
            user_agent: format!("agent {i}").into(),
            browser: "Firefox".into(),
            os: "Linux".into(),
            device: "desktop".into(),
            ..Visit::default()
        },
        client_hash: i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        referer_host: "".into(),
    }
}

fn record(store: &dyn Store, link_id: u64, at: u64, range: std::ops::Range<u64>) {
    let ids: Vec<u64> = range.collect();
    for chunk in ids.chunks(1000) {
        let mut batch: Vec<NewVisit> = chunk.iter().map(|i| new_visit(link_id, at, *i)).collect();
        store.record_visits(&mut batch).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_export_streams_100k_visits_page_by_page() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let writer = store.clone();
    tokio::task::spawn_blocking(move || {
        record(&*writer, 7, T0, 0..100_000);
        record(&*writer, 8, T0, 0..10); // another link's visits stay out
    })
    .await
    .unwrap();

    let stats = Arc::new(Statistics::new(
        store.clone(),
        Arc::new(ManualClock::new(T0)),
    ));
    let mut stream = csv_body(stats, 7, None).into_data_stream();
    let (mut chunks, mut rows, mut header) = (0usize, 0usize, None);
    let mut largest = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        chunks += 1;
        largest = largest.max(chunk.len());
        let text = std::str::from_utf8(&chunk).unwrap();
        let mut lines = text.lines().count();
        if header.is_none() {
            header = text.lines().next().map(str::to_string);
            lines -= 1;
        }
        // Each chunk is one store page: the export never holds more than a page per chunk.
        assert!(lines <= CSV_PAGE, "a chunk of {lines} rows");
        rows += lines;
    }
    assert_eq!(rows, 100_000);
    assert_eq!(chunks, 100_000 / CSV_PAGE);
    assert!(header
        .unwrap()
        .starts_with("id,at,code,client_id,ip,user_agent"));
    assert!(largest < 256 * 1024, "largest chunk {largest} bytes");
    assert_eq!(store.visit_totals(7).unwrap().visits, 100_000);
}

#[tokio::test(flavor = "current_thread")]
async fn every_visit_is_journaled_without_waiting_and_folded_at_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let config = Config::from_toml("[visits]\nqueue = 4\n").unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(T0));
    let journal = dir.path().join("journal");
    let recorder = Recorder::start(
        &config.visits,
        vshortlink::memory::Bounds::derive(&config)
            .expect("bounds")
            .visit_writer(),
        JournalOptions {
            dir: &journal,
            sync: false,
        },
        store.clone(),
        clock,
    )
    .unwrap();
    // On a single-threaded runtime the writer cannot run between these calls: each visit is
    // in the journal when its call returns, whatever the queue bound says, counted once.
    for _ in 0..100 {
        recorder.record(1, "abcdef", [10, 0, 0, 1].into(), None, None, None);
    }
    let metrics = recorder.metrics();
    assert_eq!(metrics.accepted.get(), 100);
    assert_eq!(metrics.dropped.get(), 0);
    assert_eq!(recorder.depth(), 100);
    // Shutdown folds what was journaled.
    recorder.shutdown().await;
    assert_eq!(metrics.written.get(), 100);
    assert_eq!(store.visit_totals(1).unwrap().visits, 100);
    assert_eq!(recorder.depth(), 0);
}

#[test]
fn retention_prunes_old_visits_only_and_counters_stay() {
    let dir = tempfile::tempdir().unwrap();
    let overlay = format!(
        "[visits]\nretention = \"30d\"\n[storage]\npath = {:?}\n",
        dir.path()
    );
    let config = Arc::new(Config::from_toml(&overlay).unwrap());
    let store = store(&dir);
    let clock = Arc::new(ManualClock::new(T0));
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let app = runtime
        .block_on(vshortlink::build(config, store.clone(), dyn_clock))
        .unwrap();
    let job = app.state.lifecycle.clone();

    // 1,200 visits 40 days ago (more than one pruning chunk), 30 visits 10 days ago.
    record(&*store, 1, T0, 0..1_200);
    record(&*store, 1, T0 + 30 * DAY, 1_200..1_230);
    let before = store.visit_summary(1, T0, T0 + 31 * DAY).unwrap();
    clock.set(T0 + 40 * DAY);

    let report = job.run().unwrap();
    assert_eq!(report.visits_pruned, 1_200);
    let left = store.visits_page(1, None, 1000).unwrap();
    assert_eq!(left.items.len(), 30);
    assert!(left.items.iter().all(|v| v.at == T0 + 30 * DAY));
    // Counters are kept: totals, series, top lists and distinct visitors are unchanged.
    assert_eq!(store.visit_totals(1).unwrap().visits, 1_230);
    let after = store.visit_summary(1, T0, T0 + 31 * DAY).unwrap();
    assert_eq!(after.hours, before.hours);
    assert_eq!(after.unique_visitors, before.unique_visitors);
    assert_eq!(
        store.day_counts(T0 / DAY, T0 / DAY).unwrap()[0].visits,
        1_200
    );
    // A second run finds nothing more.
    assert_eq!(job.run().unwrap().visits_pruned, 0);
}

#[test]
fn visit_pages_cross_blocks_in_id_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    // Three batches, each interleaving two links, so each link's visits sit in three blocks.
    let mut expected = Vec::new();
    for b in 0..3u64 {
        let mut batch: Vec<NewVisit> = (0..20)
            .map(|i| new_visit(1 + i % 2, T0 + b, b * 100 + i))
            .collect();
        store.record_visits(&mut batch).unwrap();
        // Every visit gets an id of its own, above every earlier batch's.
        let mut ids: Vec<u64> = batch.iter().map(|v| v.visit.id).collect();
        ids.sort_unstable();
        assert_eq!(ids, ((b * 20 + 1)..=(b * 20 + 20)).collect::<Vec<_>>());
        let mut mine: Vec<u64> = batch
            .iter()
            .filter(|v| v.visit.link_id == 2)
            .map(|v| v.visit.id)
            .collect();
        mine.sort_unstable();
        expected.extend(mine);
    }
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store.visits_page(2, after, 7).unwrap();
        assert!(page.items.len() <= 7);
        seen.extend(page.items.iter().map(|v| v.id));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(seen, expected);
    assert!(seen
        .iter()
        .all(|id| store.visits_page(2, Some(id - 1), 1).unwrap().items[0].id == *id));
    assert_eq!(store.visit_totals(1).unwrap().visits, 30);
}
