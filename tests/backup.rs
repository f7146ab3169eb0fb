//! Backups while running, against the real binary: `GET /api/v1/backup` under concurrent
//! creates, what it holds only when asked, zstd both ways, who may take one; `vshortlink
//! backup` (atomic: a server killed mid-stream leaves no file), `backup --verify` and
//! `restore` refusing a cut or changed file by its line, a restore that passes `check` and
//! serves every link as before; the scheduled backups (`keep`, an unwritable `dir`), and two
//! PostgreSQL instances taking each turn once. With `TEST_STORE=postgres` every server stores in
//! PostgreSQL (CI runs this file both ways).

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cli::{text, vsl};
use common::{TestApp, ADMIN, EDITOR, SPORTS_ADMIN, VIEWER};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const BROWSER_ACCEPT: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

/// `GET /api/v1/backup?{query}` as admin, with extra headers.
fn backup(app: &TestApp, query: &str, headers: &[(&str, &str)]) -> reqwest::blocking::Response {
    let mut request = app.req(
        reqwest::Method::GET,
        &format!("/api/v1/backup{query}"),
        Some(ADMIN),
    );
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().expect("GET /api/v1/backup");
    assert_eq!(response.status(), 200, "GET /api/v1/backup{query}");
    response
}

/// The lines of a plain backup, its `end` line checked against the lines before it.
fn checked_lines(body: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(body).expect("UTF-8");
    assert!(text.ends_with('\n'), "the backup ends with a newline");
    let lines: Vec<&str> = text.lines().collect();
    let (end, records) = lines.split_last().expect("an end line");
    let end: Value = serde_json::from_str(end).expect("the end line is JSON");
    assert_eq!(end["type"], "end", "{end}");
    assert_eq!(end["records"].as_u64(), Some(records.len() as u64), "{end}");
    let mut sha = Sha256::new();
    for line in records {
        sha.update(line.as_bytes());
        sha.update(b"\n");
    }
    assert_eq!(
        end["sha256"],
        hex(&sha.finalize()),
        "the end line's checksum"
    );
    records
        .iter()
        .map(|l| serde_json::from_str(l).expect("every record is whole JSON"))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn of_type<'a>(records: &'a [Value], kind: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["type"] == kind).collect()
}

/// Creates `n` links through the batch API, 1000 at a time; their codes.
fn batch(app: &TestApp, n: usize, tag: &str) -> Vec<String> {
    let mut codes = Vec::with_capacity(n);
    let mut made = 0;
    while made < n {
        let take = (n - made).min(1000);
        let links: Vec<Value> = (made..made + take)
            .map(|i| json!({"url": format!("https://example.com/{tag}/{i}")}))
            .collect();
        let response = app.post_json("/api/v1/links/batch", ADMIN, &json!({ "links": links }));
        assert!(
            response.status().is_success(),
            "batch: {}",
            response.status()
        );
        let body: Value = response.json().expect("json");
        for item in body["results"].as_array().expect("results") {
            assert_eq!(item["ok"], true, "{item}");
            codes.push(item["link"]["code"].as_str().expect("code").to_string());
        }
        made += take;
    }
    codes
}

fn link_view(app: &TestApp, code: &str) -> Value {
    app.api_get(&format!("/api/v1/links/{code}"), ADMIN)
}

/// Waits until the link's `visits_total` reaches `n` (the visit writer works behind the
/// redirect).
fn visits_reach(app: &TestApp, code: &str, n: u64) {
    let started = Instant::now();
    while link_view(app, code)["visits_total"].as_u64() != Some(n) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{code}: visits_total stayed {}",
            link_view(app, code)["visits_total"]
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn redirect(app: &TestApp, code: &str, headers: &[(&str, &str)]) -> reqwest::blocking::Response {
    let mut request = app.client.get(app.url(&format!("/{code}")));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().expect("GET /{code}")
}

fn location(response: &reqwest::blocking::Response) -> Option<String> {
    response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// `vshortlink backup` from `app` into `file`.
fn cli_backup(app: &TestApp, file: &Path) -> std::process::Output {
    vsl(
        &app.config_path(),
        &[
            "backup",
            "--server",
            &format!("http://{}", app.addr),
            "--key",
            ADMIN,
            "--output",
            file.to_str().expect("path"),
        ],
    )
}

#[test]
fn a_backup_under_concurrent_creates_holds_every_link_acknowledged_before_it_began() {
    let app = TestApp::binary();
    let before = batch(&app, 3000, "before");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Creates on two threads for the whole backup.
    let writers: Vec<_> = (0..2)
        .map(|t| {
            let stop = stop.clone();
            let url = app.url("/api/v1/links");
            let client = app.client.clone();
            std::thread::spawn(move || {
                let mut made = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let response = client
                        .post(&url)
                        .bearer_auth(ADMIN)
                        .json(&json!({"url": format!("https://example.com/during/{t}/{made}")}))
                        .send()
                        .expect("create");
                    assert!(response.status().is_success());
                    made += 1;
                }
                made
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let body = backup(&app, "", &[]).bytes().expect("body");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let made: u64 = writers.into_iter().map(|w| w.join().expect("writer")).sum();
    assert!(made > 0, "creates ran during the backup");
    let records = checked_lines(&body);
    let codes: std::collections::HashSet<&str> = of_type(&records, "link")
        .iter()
        .filter_map(|r| r["code"].as_str())
        .collect();
    for code in &before {
        assert!(
            codes.contains(code.as_str()),
            "{code} is missing from the backup"
        );
    }
    assert!(of_type(&records, "visit").is_empty());
    assert!(of_type(&records, "lead").is_empty());
}

/// A link with a lead, visits, a password and a cap, on `app`; the codes by kind.
struct Made {
    plain: Vec<String>,
    password: String,
    capped: String,
    form: String,
}

fn make_everything(app: &TestApp) -> Made {
    let plain = batch(app, 20, "plain");
    for _ in 0..3 {
        assert_eq!(redirect(app, &plain[0], &[]).status(), 302);
    }
    visits_reach(app, &plain[0], 3);
    let password = app
        .create(json!({"url": "https://example.com/secret", "password": "open sesame 42"}))["code"]
        .as_str()
        .expect("code")
        .to_string();
    let capped = app.create(json!({"url": "https://example.com/capped", "max_visits": 10}))["code"]
        .as_str()
        .expect("code")
        .to_string();
    for _ in 0..4 {
        assert_eq!(redirect(app, &capped, &[]).status(), 302);
    }
    visits_reach(app, &capped, 4);
    let form = app.create(json!({
        "url": "https://example.com/after-the-form",
        "form": {"fields": [{"name": "phone", "label": "Phone", "type": "tel", "required": true}]},
    }))["code"]
        .as_str()
        .expect("code")
        .to_string();
    let lead = app
        .client
        .post(app.url(&format!("/{form}")))
        .header("accept", BROWSER_ACCEPT)
        .form(&[("form", "1"), ("phone", "+86 138 0013 8000")])
        .send()
        .expect("POST the form");
    assert_eq!(lead.status(), 302, "the lead is taken");
    // The visit the form's redirect counts, written before any backup is taken.
    visits_reach(app, &form, 1);
    Made {
        plain,
        password,
        capped,
        form,
    }
}

#[test]
fn visits_and_leads_are_in_only_when_asked_and_accounts_are_accepted() {
    let app = TestApp::binary();
    make_everything(&app);
    let bare = checked_lines(&backup(&app, "", &[]).bytes().expect("body"));
    assert!(!of_type(&bare, "link").is_empty());
    assert!(of_type(&bare, "visit").is_empty() && of_type(&bare, "lead").is_empty());
    let visits = checked_lines(&backup(&app, "?visits=true", &[]).bytes().expect("body"));
    assert_eq!(
        of_type(&visits, "visit").len(),
        8,
        "3 + 4 visits, and the form's"
    );
    assert!(of_type(&visits, "lead").is_empty());
    let leads = checked_lines(&backup(&app, "?leads=true", &[]).bytes().expect("body"));
    assert_eq!(of_type(&leads, "lead").len(), 1);
    assert!(of_type(&leads, "visit").is_empty());
    // No user, team or key exists here: asking for accounts adds the key pepper alone (run-time
    // keys' hashes need it after a restore).
    let all = checked_lines(
        &backup(&app, "?visits=true&leads=true&accounts=true", &[])
            .bytes()
            .expect("body"),
    );
    assert_eq!(
        all.len(),
        of_type(&bare, "link").len() + 8 + 1 + of_type(&bare, "key").len() + 1
    );
    assert!(of_type(&all, "key").len() > of_type(&bare, "key").len());
    // A bad option is named.
    let response = app
        .req(
            reqwest::Method::GET,
            "/api/v1/backup?visits=maybe",
            Some(ADMIN),
        )
        .send()
        .expect("GET");
    let problem = common::problem(response, 400);
    assert_eq!(problem["field"], "visits", "{problem}");
}

#[test]
fn zstd_both_ways_holds_the_same_lines() {
    let app = TestApp::binary();
    batch(&app, 500, "z");
    let plain = backup(&app, "", &[]).bytes().expect("body");
    let records = checked_lines(&plain);

    let encoded = backup(&app, "", &[("accept-encoding", "gzip, zstd")]);
    assert_eq!(encoded.headers()["content-type"], "application/x-ndjson");
    assert_eq!(encoded.headers()["content-encoding"], "zstd");
    let bytes = encoded.bytes().expect("body");
    assert_eq!(&bytes[..4], &[0x28, 0xb5, 0x2f, 0xfd], "zstd's magic");
    let decoded = zstd::decode_all(&bytes[..]).expect("zstd");
    assert_eq!(checked_lines(&decoded).len(), records.len());

    let file = backup(&app, "?compress=zstd", &[]);
    assert_eq!(file.headers()["content-type"], "application/zstd");
    assert!(file.headers().get("content-encoding").is_none());
    let decoded = zstd::decode_all(&file.bytes().expect("body")[..]).expect("zstd");
    let again = checked_lines(&decoded);
    assert_eq!(
        of_type(&again, "link").len(),
        of_type(&records, "link").len()
    );
    // Plain when zstd is not asked for, or refused with q=0.
    let refused = backup(&app, "", &[("accept-encoding", "zstd;q=0")]);
    assert!(refused.headers().get("content-encoding").is_none());
}

#[test]
fn only_an_admin_of_every_space_takes_a_backup() {
    let app = TestApp::binary();
    let status = |key: Option<&str>| {
        app.req(reqwest::Method::GET, "/api/v1/backup", key)
            .send()
            .expect("GET")
            .status()
            .as_u16()
    };
    assert_eq!(status(None), 401);
    assert_eq!(status(Some(VIEWER)), 403);
    assert_eq!(status(Some(EDITOR)), 403);
    assert_eq!(status(Some(SPORTS_ADMIN)), 403, "a space-limited admin");
    assert_eq!(status(Some(ADMIN)), 200);
}

#[test]
fn verify_and_restore_refuse_a_cut_or_changed_file_naming_the_line_and_write_nothing() {
    let app = TestApp::binary();
    batch(&app, 50, "damaged");
    let dir = tempfile::tempdir().expect("dir");
    let good = dir.path().join("good.jsonl");
    let out = cli_backup(&app, &good);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let verified = vsl(
        &app.config_path(),
        &["backup", "--verify", good.to_str().unwrap()],
    );
    assert!(verified.status.success(), "{}", text(&verified.stderr));
    assert!(
        text(&verified.stdout).contains("50 links"),
        "{}",
        text(&verified.stdout)
    );
    let bytes = std::fs::read(&good).expect("read");
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();

    // Cut in the middle of line 10.
    let cut_at: usize = lines[..9].iter().map(|l| l.len()).sum::<usize>() + 20;
    let cut = dir.path().join("cut.jsonl");
    std::fs::write(&cut, &bytes[..cut_at]).expect("write");
    // Cut at a line's end: no end line.
    let short = dir.path().join("short.jsonl");
    std::fs::write(&short, &bytes[..cut_at - 20]).expect("write");
    // A record changed (still valid JSON): the end line's checksum fails.
    let changed = dir.path().join("changed.jsonl");
    let text_of = String::from_utf8(bytes.clone()).expect("UTF-8");
    let altered = text_of.replacen(
        "https://example.com/damaged/7\"",
        "https://example.com/damaged/8\"",
        1,
    );
    assert_ne!(altered, text_of);
    std::fs::write(&changed, altered).expect("write");
    // The same damage in a zstd file.
    let cut_zst = dir.path().join("cut.jsonl.zst");
    let compressed = zstd::encode_all(&bytes[..], 3).expect("zstd");
    std::fs::write(&cut_zst, &compressed[..compressed.len() * 2 / 3]).expect("write");
    let changed_zst = dir.path().join("changed.jsonl.zst");
    std::fs::write(
        &changed_zst,
        zstd::encode_all(&std::fs::read(&changed).expect("read")[..], 3).expect("zstd"),
    )
    .expect("write");

    let end_line = lines.len();
    let cases: [(&PathBuf, String); 5] = [
        (&cut, "line 10: torn".to_string()),
        (
            &short,
            "line 10: the file ends without its end line".to_string(),
        ),
        (&changed, format!("line {end_line} (the end line)")),
        (&cut_zst, "cannot be read".to_string()),
        (&changed_zst, format!("line {end_line} (the end line)")),
    ];
    // A fresh store to restore into (stopped).
    let target = TestApp::binary();
    let mut target = target;
    target.terminate();
    for (file, needle) in &cases {
        let file = file.to_str().unwrap();
        let verify = vsl(&target.config_path(), &["backup", "--verify", file]);
        assert!(!verify.status.success(), "{file} verified");
        assert!(
            text(&verify.stderr).contains(needle.as_str()),
            "{file}: {}",
            text(&verify.stderr)
        );
        let restore = vsl(&target.config_path(), &["restore", file]);
        assert!(!restore.status.success(), "{file} restored");
        let said = text(&restore.stderr);
        assert!(
            said.contains(needle.as_str()) && said.contains("nothing was restored"),
            "{file}: {said}"
        );
    }
    target.respawn();
    assert_eq!(target.link_total(), 0, "nothing was written");
}

#[test]
fn a_restore_passes_check_and_serves_every_link_with_its_options_counts_visits_and_leads() {
    let source = TestApp::binary();
    let made = make_everything(&source);
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("all.jsonl.zst");
    let out = cli_backup(&source, &file);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        &std::fs::read(&file).expect("read")[..4],
        &[0x28, 0xb5, 0x2f, 0xfd]
    );
    // Not into a store that has links (here, the running source's own).
    let refused = vsl(&source.config_path(), &["restore", file.to_str().unwrap()]);
    assert!(!refused.status.success());
    let said = text(&refused.stderr);
    assert!(
        said.contains("running") || said.contains("already has"),
        "{said}"
    );

    let mut target = TestApp::binary();
    target.terminate();
    let restored = vsl(&target.config_path(), &["restore", file.to_str().unwrap()]);
    assert!(restored.status.success(), "{}", text(&restored.stderr));
    let checked = vsl(&target.config_path(), &["check"]);
    assert!(
        checked.status.success(),
        "{}{}",
        text(&checked.stdout),
        text(&checked.stderr)
    );
    // Once more into the same store: refused without --force, merged (all unchanged) with it.
    let again = vsl(&target.config_path(), &["restore", file.to_str().unwrap()]);
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("--force"),
        "{}",
        text(&again.stderr)
    );
    let forced = vsl(
        &target.config_path(),
        &["restore", "--force", file.to_str().unwrap()],
    );
    assert!(forced.status.success(), "{}", text(&forced.stderr));
    assert!(
        text(&forced.stderr).contains("created 0"),
        "{}",
        text(&forced.stderr)
    );
    target.respawn();

    let everything: Vec<&String> = made
        .plain
        .iter()
        .chain([&made.password, &made.capped, &made.form])
        .collect();
    for code in &everything {
        let (was, is) = (link_view(&source, code), link_view(&target, code));
        for field in [
            "url",
            "status",
            "created_at",
            "expires_at",
            "visits_total",
            "password_protected",
            "max_visits",
            "visits_remaining",
        ] {
            assert_eq!(was[field], is[field], "{code}: {field}");
        }
    }
    // The visits, before the redirects below add one to each plain link.
    let visits =
        |app: &TestApp| app.api_get(&format!("/api/v1/links/{}/visits", made.plain[0]), ADMIN);
    assert_eq!(
        visits(&source)["items"].as_array().map(Vec::len),
        visits(&target)["items"].as_array().map(Vec::len)
    );
    for code in &made.plain {
        let response = redirect(&target, code, &[]);
        assert_eq!(response.status(), 302, "{code}");
        assert_eq!(
            location(&response),
            link_view(&source, code)["url"].as_str().map(str::to_string)
        );
    }
    // The password hash came along: the same password opens it, another does not.
    let opened = redirect(
        &target,
        &made.password,
        &[("x-link-password", "open sesame 42")],
    );
    assert_eq!(
        location(&opened).as_deref(),
        Some("https://example.com/secret")
    );
    assert_ne!(
        redirect(
            &target,
            &made.password,
            &[("x-link-password", "wrong one here")]
        )
        .status(),
        302
    );
    // The cap's count came along: 4 of 10 used, so the next redirect leaves 5.
    assert_eq!(redirect(&target, &made.capped, &[]).status(), 302);
    let started = Instant::now();
    while link_view(&target, &made.capped)["visits_remaining"] != 5 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{}",
            link_view(&target, &made.capped)
        );
        std::thread::sleep(Duration::from_millis(25));
    }
    // The lead.
    let leads = |app: &TestApp| {
        app.api_get(&format!("/api/v1/links/{}/leads", made.form), ADMIN)["items"].clone()
    };
    assert_eq!(leads(&source), leads(&target));
    assert_eq!(leads(&target).as_array().map(Vec::len), Some(1));
}

#[test]
fn a_server_killed_during_vshortlink_backup_leaves_no_file_and_a_failure() {
    let mut app = TestApp::binary();
    // Enough that the stream outlasts the kernel's socket buffers while the client is paused.
    batch(&app, 40_000, "kill");
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("killed.jsonl");
    let mut client = Command::new(env!("CARGO_BIN_EXE_vshortlink"))
        .arg("--config")
        .arg(app.config_path())
        .args([
            "backup",
            "--server",
            &format!("http://{}", app.addr),
            "--key",
            ADMIN,
        ])
        .arg("--output")
        .arg(&file)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start vshortlink backup");
    // Pause the client as soon as its temporary file holds the stream's first bytes (it is
    // made before the client connects, so its mere presence is too early), so that the
    // server is mid-stream, held back by the client, when it is killed.
    let partial = || {
        std::fs::read_dir(dir.path())
            .expect("dir")
            .filter_map(Result::ok)
            .any(|e| {
                e.file_name().to_string_lossy().ends_with(".partial")
                    && e.metadata().is_ok_and(|m| m.len() > 0)
            })
    };
    let started = Instant::now();
    while !partial() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no temporary file"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let pid = client.id().to_string();
    Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .expect("kill");
    std::thread::sleep(Duration::from_millis(700));
    app.kill9();
    Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .expect("kill");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = client.try_wait().expect("wait") {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the client hangs"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut said = String::new();
    client
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut said)
        .expect("stderr");
    assert!(!status.success(), "the backup succeeded: {said}");
    assert!(
        said.contains("broke off") || said.contains("not whole"),
        "cut mid-stream: {said}"
    );
    assert!(!file.exists(), "a partial {} was left", file.display());
    assert!(!partial(), "the temporary file was left");
    // The server is gone: a new run fails at once, and leaves nothing either.
    let out = cli_backup(&app, &file);
    assert!(!out.status.success());
    assert!(!file.exists());
    assert!(!partial());
}

/// The scheduled backups in `dir`, sorted.
fn scheduled(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("vshortlink-") && n.ends_with(".jsonl.zst"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn scheduled_backups_come_every_turn_and_keep_the_newest() {
    let dir = tempfile::tempdir().expect("dir");
    let mut app = TestApp::binary_with(
        &format!(
            "[backup]\ndir = \"{}\"\nevery = \"1s\"\nkeep = 2\n",
            dir.path().display()
        ),
        &[],
    );
    assert_eq!(app.metric("vsl_backup_last_success_timestamp_seconds"), 0.0);
    batch(&app, 30, "scheduled");
    std::thread::sleep(Duration::from_millis(4500));
    assert!(app.metric("vsl_backup_last_success_timestamp_seconds") > 1.6e9);
    assert_eq!(app.metric("vsl_backup_failures_total"), 0.0);
    // Stopped before the files are read: a turn each second would otherwise remove the
    // oldest of them while it is being verified.
    app.terminate();
    let names = scheduled(dir.path());
    assert_eq!(names.len(), 2, "keep = 2: {names:?}");
    for name in &names {
        // vshortlink-YYYYMMDDTHHMMSSZ.jsonl.zst
        let stamp = &name["vshortlink-".len()..name.len() - ".jsonl.zst".len()];
        assert_eq!(stamp.len(), 16, "{name}");
        assert_eq!(&stamp[8..9], "T");
        assert!(stamp.ends_with('Z'));
        let path = dir.path().join(name);
        let verified = vsl(
            &app.config_path(),
            &["backup", "--verify", path.to_str().unwrap()],
        );
        assert!(
            verified.status.success(),
            "{name}: {}",
            text(&verified.stderr)
        );
        assert!(
            text(&verified.stdout).contains("30 links"),
            "{}",
            text(&verified.stdout)
        );
    }
    // No temporary file of a finished turn is left (a turn may be under way now: its
    // temporary file names a turn after the newest finished one).
    let newest = names.iter().max().expect("a backup");
    let hidden: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| {
            name.strip_prefix('.').is_some_and(|rest| {
                rest.get(..newest.len())
                    .is_none_or(|turn| turn <= newest.as_str())
            })
        })
        .collect();
    assert!(hidden.is_empty(), "temporary files left: {hidden:?}");
}

#[test]
fn an_unwritable_backup_dir_is_logged_and_counted_and_the_server_keeps_serving() {
    let dir = tempfile::tempdir().expect("dir");
    // A directory under a regular file can never be created.
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, b"not a directory").expect("write");
    let app = TestApp::binary_with(
        &format!(
            "[backup]\ndir = \"{}\"\nevery = \"1s\"\n",
            blocker.join("backups").display()
        ),
        &[],
    );
    std::thread::sleep(Duration::from_millis(2500));
    assert!(app.metric("vsl_backup_failures_total") >= 1.0);
    assert_eq!(app.metric("vsl_backup_last_success_timestamp_seconds"), 0.0);
    assert!(app.logged("scheduled backup failed"));
    let code = app.create(json!({"url": "https://example.com/still-serving"}))["code"]
        .as_str()
        .expect("code")
        .to_string();
    let response = redirect(&app, &code, &[]);
    assert_eq!(
        location(&response).as_deref(),
        Some("https://example.com/still-serving")
    );
    let failures = app.metric("vsl_backup_failures_total");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        app.metric("vsl_backup_failures_total") > failures,
        "retried at the next turn"
    );
}

#[test]
fn a_bad_backup_setting_stops_start_up_naming_the_key() {
    let dir = tempfile::tempdir().expect("dir");
    for (toml, key) in [
        ("[backup]\nevery = \"500ms\"\ndir = \"x\"\n", "backup.every"),
        ("[backup]\nevery = \"6h\"\n", "backup.dir"),
        ("[backup]\nkeep = 0\n", "backup.keep"),
    ] {
        let config = dir.path().join("config.toml");
        std::fs::write(&config, toml).expect("write");
        let out = vsl(&config, &["backup", "--verify", "/nonexistent"]);
        assert_eq!(out.status.code(), Some(2), "{toml}");
        assert!(
            text(&out.stderr).contains(key),
            "{toml}: {}",
            text(&out.stderr)
        );
    }
}

#[cfg(feature = "postgres")]
#[test]
fn two_postgres_instances_make_one_backup_per_turn() {
    let Some(url) = common::postgres::fresh_database() else {
        eprintln!("skipped: PostgreSQL is not installed");
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let extra = format!(
        "[backup]\ndir = \"{}\"\nevery = \"1s\"\nkeep = 100\n",
        dir.path().display()
    );
    let a = TestApp::start_on(&url, &extra, &[]);
    let b = TestApp::start_on(&url, &extra, &[]);
    batch(&a, 20, "pair");
    std::thread::sleep(Duration::from_millis(5500));
    // The files each instance says it wrote: no turn twice, each one there.
    let written = |app: &TestApp| -> Vec<String> {
        app.log
            .lock()
            .map(|l| {
                l.iter()
                    .filter(|line| line.contains("scheduled backup written"))
                    .filter_map(|line| line.rsplit('/').next().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (by_a, by_b) = (written(&a), written(&b));
    let mut all: Vec<&String> = by_a.iter().chain(&by_b).collect();
    assert!(all.len() >= 4, "a {by_a:?}, b {by_b:?}");
    all.sort();
    let before = all.len();
    all.dedup();
    assert_eq!(
        all.len(),
        before,
        "a turn written twice: a {by_a:?}, b {by_b:?}"
    );
    let names = scheduled(dir.path());
    for name in &all {
        assert!(names.contains(name), "{name} is not in {names:?}");
    }
    assert_eq!(a.metric("vsl_backup_failures_total"), 0.0);
    assert_eq!(b.metric("vsl_backup_failures_total"), 0.0);
}
