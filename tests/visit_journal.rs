//! The visit journal against the real binary (sled, or PostgreSQL with `TEST_STORE=postgres`):
//! every redirect answered before a `kill -9` is a visit after the restart, counted exactly
//! (also with the store's writer slowed so that the journal grows ahead of it); a torn last
//! record is skipped with a log line and the rest folded; a disk that refuses the journal's
//! writes drops visits (counted, `/healthz` says so) while redirects go on, and nothing
//! already journaled is lost when space returns.
//!
//! Two test-only knobs of debug builds (release builds have neither):
//! `VSHORTLINK_TEST_FOLD_DELAY_MS` pauses every fold, and `VSHORTLINK_TEST_JOURNAL_FULL` names
//! a file whose presence makes the journal's appends fail with ENOSPC. A real full disk needs
//! a small file system (root, to mount one); `RLIMIT_FSIZE` on the child would stop sled's
//! writes as well as the journal's (and kill the process with SIGXFSZ), so it would not test
//! the journal alone. The knob fails the append exactly where a full disk fails it.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{TestApp, ADMIN};
use serde_json::{json, Value};

const AGENT: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
    Chrome/124.0.0.0 Safari/537.36";

fn new_link(app: &TestApp, url: &str) -> String {
    let created = app.create(json!({ "url": url }));
    created["code"].as_str().expect("code").to_string()
}

fn visits_total(app: &TestApp, code: &str) -> u64 {
    app.api_get(&format!("/api/v1/links/{code}"), ADMIN)["visits_total"]
        .as_u64()
        .unwrap_or(0)
}

/// Waits until `code` has `n` visits, and checks it stays there (no visit counted twice).
fn expect_visits(app: &TestApp, code: &str, n: u64) {
    assert_eq!(expect_visits_within(app, code, n, n), n);
}

/// Waits until `code` has at least `least` visits, checks that it settles at no more than
/// `most` and stays there (no visit counted twice), and returns the count.
fn expect_visits_within(app: &TestApp, code: &str, least: u64, most: u64) -> u64 {
    let started = Instant::now();
    let mut total = visits_total(app, code);
    while total < least {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "visits_total {total}, want at least {least}"
        );
        std::thread::sleep(Duration::from_millis(100));
        total = visits_total(app, code);
    }
    std::thread::sleep(Duration::from_millis(2500));
    let settled = visits_total(app, code);
    assert!(
        settled <= most,
        "visits_total {settled}, want at most {most}: a visit was counted twice"
    );
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        visits_total(app, code),
        settled,
        "the count moved after settling"
    );
    settled
}

/// Clients redirect through `code` until the server is killed; returns the 302s they got.
fn burst_then_kill(app: &mut TestApp, code: &str, clients: usize, for_how_long: Duration) -> u64 {
    let answered = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let url = app.url(&format!("/{code}"));
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (answered, stop, url) = (answered.clone(), stop.clone(), url.clone());
            let client = reqwest::blocking::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(10))
                .build()
                .expect("client");
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match client.get(&url).header("user-agent", AGENT).send() {
                        Ok(r) if r.status().as_u16() == 302 => {
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(r) => panic!("redirect answered {}", r.status()),
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(for_how_long);
    app.kill9();
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("client");
    }
    answered.load(Ordering::Relaxed)
}

fn kill9_during_a_burst(env: &[(&str, &str)]) {
    const CLIENTS: usize = 8;
    let mut app = TestApp::binary_with("", env);
    let code = new_link(&app, "https://example.com/burst");
    let mut expected = 0;
    for round in 0..2u64 {
        let answered = burst_then_kill(
            &mut app,
            &code,
            CLIENTS,
            Duration::from_millis(1500 + 400 * round),
        );
        assert!(
            answered > 100,
            "round {round}: only {answered} redirects answered"
        );
        app.respawn();
        // Every answered redirect is a visit. A visit is journaled before its answer is
        // written, so a request in flight at the kill (one per client at most) may be a visit
        // whose 302 never reached the client: the server cannot know it was not read.
        let total = expect_visits_within(
            &app,
            &code,
            expected + answered,
            expected + answered + CLIENTS as u64,
        );
        eprintln!(
            "round {round}: {answered} answered, {} in flight at the kill recorded, {total} visits in all",
            total - expected - answered
        );
        expected = total;
    }
    // A clean stop and start changes nothing either.
    app.restart();
    assert_eq!(visits_total(&app, &code), expected);
}

#[test]
fn kill9_during_a_burst_of_redirects_keeps_every_answered_visit() {
    kill9_during_a_burst(&[]);
}

/// The store's writer is slowed (every fold waits 2 s), so the journal holds several seconds
/// of visits when the kill comes, and the replay folds them.
#[test]
fn kill9_with_the_writer_behind_keeps_every_answered_visit() {
    kill9_during_a_burst(&[("VSHORTLINK_TEST_FOLD_DELAY_MS", "2000")]);
}

/// The newest journal segment.
fn last_segment(data: &Path) -> std::path::PathBuf {
    let mut segments: Vec<_> = std::fs::read_dir(data.join("journal"))
        .expect("journal dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "vj"))
        .collect();
    segments.sort();
    segments.pop().expect("a segment")
}

#[test]
fn a_torn_last_record_is_skipped_with_a_log_line_and_the_rest_folded() {
    // Folds wait far longer than the test: the visits are only in the journal at the kill.
    let mut app = TestApp::binary_with("", &[("VSHORTLINK_TEST_FOLD_DELAY_MS", "600000")]);
    let code = new_link(&app, "https://example.com/torn");
    for _ in 0..25 {
        let r = app
            .client
            .get(app.url(&format!("/{code}")))
            .header("user-agent", AGENT)
            .send()
            .expect("redirect");
        assert_eq!(r.status().as_u16(), 302);
    }
    app.kill9();
    // A crash in the middle of copying a 26th record: its header says 200 bytes, 20 follow,
    // where the segment's records end (the killed process left the room after them zeros).
    let segment = last_segment(&app.data_path());
    let mut bytes = std::fs::read(&segment).expect("segment");
    let mut end = 8; // the segment's magic
    while let Some(len) = bytes.get(end..end + 4) {
        let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
        if len == 0 {
            break;
        }
        end += 8 + len;
    }
    let mut torn = 200u32.to_le_bytes().to_vec();
    torn.extend_from_slice(&0xdead_beefu32.to_le_bytes());
    torn.extend_from_slice(&[7u8; 20]);
    bytes.resize(bytes.len().max(end + torn.len()), 0);
    bytes[end..end + torn.len()].copy_from_slice(&torn);
    std::fs::write(&segment, bytes).expect("tear");
    app.set_env(&[]);
    app.respawn();
    expect_visits(&app, &code, 25);
    assert!(app.logged("visit journal: torn or corrupt record skipped"));
    assert_eq!(app.metric("vsl_visit_journal_skipped_total"), 1.0);
}

#[test]
fn a_full_disk_drops_visits_counted_while_redirects_go_on_and_keeps_what_was_journaled() {
    let dir = tempfile::tempdir().expect("dir");
    let full = dir.path().join("disk-is-full");
    let full_env = full.to_string_lossy().to_string();
    // Folds are slowed so that visits journaled before the disk fills are not yet folded.
    let mut app = TestApp::binary_with(
        "",
        &[
            ("VSHORTLINK_TEST_JOURNAL_FULL", full_env.as_str()),
            ("VSHORTLINK_TEST_FOLD_DELAY_MS", "1500"),
        ],
    );
    let code = new_link(&app, "https://example.com/full");
    let redirect = |app: &TestApp| {
        let r = app
            .client
            .get(app.url(&format!("/{code}")))
            .header("user-agent", AGENT)
            .send()
            .expect("redirect");
        assert_eq!(r.status().as_u16(), 302, "redirects go on");
    };
    for _ in 0..20 {
        redirect(&app);
    }
    std::fs::write(&full, b"").expect("fill");
    for _ in 0..30 {
        redirect(&app);
    }
    assert_eq!(app.metric("vsl_visits_dropped_total"), 30.0);
    let health = app.get("/healthz");
    assert_eq!(health.status().as_u16(), 503);
    let body: Value = health.json().expect("json");
    assert_eq!(body["reason"], "visit_journal_full");
    assert!(app.logged("the visit journal cannot be written"));
    // Space returns.
    std::fs::remove_file(&full).expect("free");
    for _ in 0..10 {
        redirect(&app);
    }
    assert_eq!(app.get("/healthz").status().as_u16(), 200);
    expect_visits(&app, &code, 30);
    assert_eq!(app.metric("vsl_visits_dropped_total"), 30.0);
    // And across a kill: what was folded stays, nothing is folded twice.
    app.kill9();
    app.respawn();
    expect_visits(&app, &code, 30);
}
