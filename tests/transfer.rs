//! `vshortlink export` / `import` with the real binary: export → import into a fresh data dir
//! reproduces every link byte for byte (and every visit), a second import is a no-op, YOURLS and
//! Shlink CSV fixtures import with their codes, malformed lines are reported with their
//! numbers, and a running server's directory is refused at once.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::cli::{offline, offline_on_test_store, text, vsl};
use common::{TestApp, ADMIN};
use serde_json::{json, Value};

#[test]
fn export_import_round_trip_is_exact_and_idempotent() {
    let mut app = TestApp::start_sled("", &[]);
    let a = app.create(json!({"url": "https://example.com/a", "title": "A", "tags": ["x", "y"]}));
    let b = app.create(json!({"url": "https://example.com/b", "code": "bee"}));
    let c = app.create(json!({"url": "https://example.com/c", "length": 5, "ttl": 3600}));
    app.create(json!({"url": "https://example.com/d", "space": "sports", "expires_at": null}));
    let gone = app.create(json!({"url": "https://example.com/gone", "code": "gone"}));
    let response = app
        .req(reqwest::Method::DELETE, "/api/v1/links/gone", Some(ADMIN))
        .send()
        .expect("delete");
    assert_eq!(response.status().as_u16(), 204);
    assert_eq!(gone["code"], "gone");
    for code in [&a["code"], &b["code"], &a["code"], &c["code"]] {
        let r = app.get(&format!("/{}", code.as_str().expect("code")));
        assert_eq!(r.status().as_u16(), 302);
    }
    // Wait for the visit writer.
    let started = Instant::now();
    loop {
        let r = app
            .req(
                reqwest::Method::GET,
                &format!("/api/v1/links/{}", a["code"].as_str().unwrap_or("")),
                Some(ADMIN),
            )
            .send()
            .expect("get");
        let body: Value = r.json().expect("json");
        if body["visits_total"] == 2 || started.elapsed() > Duration::from_secs(10) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }

    // Against the running server's directory: refused at once, saying why.
    let started = Instant::now();
    let out = vsl(&app.config_path(), &["export"]);
    assert!(!out.status.success());
    assert!(started.elapsed() < Duration::from_secs(5));
    let err = text(&out.stderr);
    assert!(
        err.contains("in use by a running vshortlink server"),
        "{err}"
    );
    let out = vsl(&app.config_path(), &["import", "/dev/null"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("in use by a running vshortlink server"));

    assert!(app.terminate().success());
    let first = app.dir.path().join("first.jsonl");
    let out = vsl(
        &app.config_path(),
        &[
            "export",
            "--visits",
            "--output",
            first.to_str().expect("path"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let exported = std::fs::read_to_string(&first).expect("export");
    let lines: Vec<&str> = exported.lines().collect();
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("\"type\":\"link\""))
            .count(),
        5
    );
    // The `hash` strategy's secret travels first, so a moved store computes the same codes.
    assert!(lines[0].contains("\"type\":\"key\"") && lines[0].contains("hash_secret"));
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("\"type\":\"visit\""))
            .count(),
        4
    );
    let deleted: Value = serde_json::from_str(
        lines
            .iter()
            .find(|l| l.contains("\"code\":\"gone\""))
            .expect("deleted link exported"),
    )
    .expect("json");
    assert_eq!(deleted["status"], "deleted");
    for key in [
        "id",
        "code",
        "url",
        "space",
        "status",
        "custom",
        "created_at",
        "updated_at",
        "expires_at",
        "title",
        "tags",
    ] {
        assert!(deleted.get(key).is_some(), "{key} in {deleted}");
    }
    // stdout is the default.
    let out = vsl(&app.config_path(), &["export", "--visits"]);
    assert_eq!(text(&out.stdout), exported);

    // Into a fresh data dir.
    let fresh = tempfile::tempdir().expect("dir");
    let config = offline(fresh.path());
    let out = vsl(&config, &["import", first.to_str().expect("path")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("read 10, created 10 (4 visits), unchanged 0, refused 0"),
        "{err}"
    );
    let out = vsl(&config, &["export", "--visits"]);
    assert!(out.status.success());
    let again = text(&out.stdout);
    assert_eq!(again, exported, "links and visits byte for byte");

    // The imported store keeps every invariant.
    let out = vsl(&config, &["check"]);
    assert!(out.status.success(), "{}", text(&out.stdout));

    // A second import changes nothing and says so.
    let out = vsl(&config, &["import", first.to_str().expect("path")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("read 10, created 0 (0 visits), unchanged 10, refused 0"),
        "{}",
        text(&out.stderr)
    );
    let out = vsl(&config, &["export", "--visits"]);
    assert_eq!(text(&out.stdout), again);

    // Into a store that has visits, an imported visit is numbered anew (id 1 is taken).
    let visit_line = again
        .lines()
        .find(|l| l.contains("\"type\":\"visit\""))
        .expect("a visit line");
    let mut visit: Value = serde_json::from_str(visit_line).expect("json");
    visit["id"] = json!(1);
    visit["link_id"] = json!(500);
    visit["code"] = json!("newone");
    let link = json!({"type": "link", "id": 500, "code": "newone", "url": "https://example.com/new",
        "space": "default", "status": "active", "custom": true,
        "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
        "expires_at": null, "deleted_at": null, "title": null, "tags": []});
    let extra = fresh.path().join("extra.jsonl");
    std::fs::write(&extra, format!("{link}\n{visit}\n")).expect("write");
    let out = vsl(&config, &["import", extra.to_str().expect("path")]);
    assert!(
        text(&out.stderr).contains("created 2 (1 visits)"),
        "{}",
        text(&out.stderr)
    );
    let out = vsl(&config, &["export", "--visits"]);
    let renumbered: Value = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("json"))
        .find(|v| v["type"] == "visit" && v["code"] == "newone")
        .expect("the new visit");
    assert_eq!(renumbered["id"], 5, "after the four kept ids");
    assert_eq!(renumbered["link_id"], 500);

    // The imported store serves: codes redirect, pools and filter agree.
    let mut served = TestApp::start_sled("", &[]);
    served.terminate();
    std::fs::remove_dir_all(served.data_path()).ok();
    copy_dir(&fresh.path().join("data"), &served.data_path());
    served.restart();
    let r = served.get(&format!("/{}", a["code"].as_str().unwrap_or("")));
    assert_eq!(r.status().as_u16(), 302);
    assert_eq!(
        r.headers().get("location").and_then(|v| v.to_str().ok()),
        Some("https://example.com/a")
    );
    assert_eq!(served.get("/gone").status().as_u16(), 410);
    // The custom code is taken; a new create does not reuse any imported code.
    let taken = served.post_json(
        "/api/v1/links",
        ADMIN,
        &json!({"url": "https://example.com/other", "code": "bee"}),
    );
    assert_eq!(taken.status().as_u16(), 409);
    let stats = served
        .req(
            reqwest::Method::GET,
            &format!("/api/v1/links/{}", a["code"].as_str().unwrap_or("")),
            Some(ADMIN),
        )
        .send()
        .expect("get");
    let body: Value = stats.json().expect("json");
    // The two imported visits and the redirect above (recorded by now or shortly after).
    assert!(
        body["visits_total"] == 2 || body["visits_total"] == 3,
        "{body}"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

#[test]
fn yourls_and_shlink_csv_import_with_their_codes() {
    let dir = tempfile::tempdir().expect("dir");
    let config = offline(dir.path());
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let yourls = fixtures.join("yourls_url.csv");
    let out = vsl(
        &config,
        &[
            "import",
            "--format",
            "yourls-csv",
            yourls.to_str().expect("path"),
        ],
    );
    let err = text(&out.stderr);
    assert!(
        !out.status.success(),
        "refusals make a non-zero exit: {err}"
    );
    assert!(err.contains("line 4: refused"), "{err}");
    assert!(err.contains("line 5: refused: malformed"), "{err}");
    assert!(err.contains("line 6: refused"), "{err}");
    assert!(
        err.contains("read 5, created 2 (0 visits), unchanged 0, refused 3"),
        "{err}"
    );

    let shlink = fixtures.join("shlink.csv");
    let out = vsl(
        &config,
        &[
            "import",
            "--format",
            "shlink-csv",
            shlink.to_str().expect("path"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("created 2"));
    // Twice: unchanged.
    let out = vsl(
        &config,
        &[
            "import",
            "--format",
            "shlink-csv",
            shlink.to_str().expect("path"),
        ],
    );
    assert!(text(&out.stderr).contains("created 0 (0 visits), unchanged 2"));

    // A generic CSV without codes: pooled codes, and dedup makes a rerun a no-op.
    let generic = dir.path().join("bitly.csv");
    std::fs::write(
        &generic,
        "Title,Long URL,Created\nOne,https://example.com/g1,2021-01-01 00:00:00\nTwo,https://example.com/g2,\n",
    )
    .expect("write");
    let out = vsl(
        &config,
        &["import", "--format", "csv", generic.to_str().expect("path")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("created 2"),
        "{}",
        text(&out.stderr)
    );
    let out = vsl(
        &config,
        &["import", "--format", "csv", generic.to_str().expect("path")],
    );
    assert!(
        text(&out.stderr).contains("unchanged 2"),
        "{}",
        text(&out.stderr)
    );

    // A dry run writes nothing.
    let extra = dir.path().join("extra.csv");
    std::fs::write(&extra, "code,url\nzz9,https://example.com/dry\n").expect("write");
    let out = vsl(
        &config,
        &[
            "import",
            "--format",
            "csv",
            "--dry-run",
            extra.to_str().expect("path"),
        ],
    );
    assert!(
        text(&out.stderr).contains("dry run: read 1, created 1"),
        "{}",
        text(&out.stderr)
    );

    let out = vsl(&config, &["export"]);
    let exported = text(&out.stdout);
    let by_code = |code: &str| -> Value {
        exported
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("json"))
            .find(|v| v["code"] == code)
            .unwrap_or_else(|| panic!("{code} imported: {exported}"))
    };
    let ozh = by_code("ozh");
    assert_eq!(ozh["url"], "https://ozh.org/");
    assert_eq!(ozh["title"], "Ozh RICHARD");
    assert_eq!(ozh["created_at"], "2019-03-14T10:21:05Z");
    assert_eq!(ozh["status"], "active");
    assert_eq!(ozh["expires_at"], Value::Null);
    assert_eq!(by_code("yourls")["url"], "https://yourls.org/docs");
    let shl = by_code("Ab3dE");
    assert_eq!(shl["url"], "https://shlink.io/documentation/");
    assert_eq!(shl["created_at"], "2023-05-01T08:00:00Z");
    assert_eq!(shl["tags"], json!(["docs", "shlink"]));
    assert_eq!(
        by_code("launch-2024")["url"],
        "https://example.com/launch?utm_source=x&b=2"
    );
    assert!(!exported.contains("zz9"), "dry run wrote nothing");
    assert_eq!(exported.lines().count(), 6);
}

#[test]
fn malformed_json_lines_are_reported_and_the_rest_imports() {
    let dir = tempfile::tempdir().expect("dir");
    let config = offline(dir.path());
    let file = dir.path().join("in.jsonl");
    std::fs::write(
        &file,
        concat!(
            r#"{"type":"link","id":7,"code":"ok1","url":"https://example.com/1","space":"default","status":"active","custom":true,"created_at":"2025-01-01T00:00:00Z","updated_at":"2025-01-01T00:00:00Z","expires_at":null,"title":null,"tags":[]}"#,
            "\n{not json\n",
            r#"{"type":"link","id":8,"code":"ok2","url":"https://example.com/2","space":"default","status":"active","custom":true,"created_at":"yesterday","updated_at":"2025-01-01T00:00:00Z","expires_at":null,"title":null,"tags":[]}"#,
            "\n",
            r#"{"type":"link","id":9,"code":"ok1","url":"https://example.com/elsewhere","space":"default","status":"active","custom":true,"created_at":"2025-01-01T00:00:00Z","updated_at":"2025-01-01T00:00:00Z","expires_at":null,"title":null,"tags":[]}"#,
            "\n",
            r#"{"type":"link","id":10,"code":"evil","url":"javascript:alert(1)","space":"default","status":"active","custom":true,"created_at":"2025-01-01T00:00:00Z","updated_at":"2025-01-01T00:00:00Z","expires_at":null,"title":null,"tags":[]}"#,
            "\n",
            r#"{"type":"link","id":11,"code":"much-too-long-code-1","url":"https://example.com/3","space":"default","status":"active","custom":true,"created_at":"2025-01-01T00:00:00Z","updated_at":"2025-01-01T00:00:00Z","expires_at":null,"title":null,"tags":[]}"#,
            "\n"
        ),
    )
    .expect("write");
    let out = vsl(&config, &["import", file.to_str().expect("path")]);
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("line 2: refused: malformed"), "{err}");
    assert!(err.contains("line 3: refused: malformed"), "{err}");
    assert!(
        err.contains("line 4: refused: the code `ok1` already leads to"),
        "{err}"
    );
    assert!(
        err.contains("line 5: refused: `url`: the scheme `javascript`"),
        "{err}"
    );
    assert!(
        err.contains("line 6: refused: `code`: `much-too-long-code-1` is not 1 to 16 characters"),
        "{err}"
    );
    assert!(
        err.contains("read 6, created 1 (0 visits), unchanged 0, refused 5"),
        "{err}"
    );
    // Reports come in line order.
    let lines: Vec<u64> = err
        .lines()
        .filter_map(|l| l.strip_prefix("line ")?.split(':').next()?.parse().ok())
        .collect();
    assert_eq!(lines, vec![2, 3, 4, 5, 6], "{err}");
    // From stdin too.
    let mut child = Command::new(env!("CARGO_BIN_EXE_vshortlink"))
        .arg("--config")
        .arg(&config)
        .arg("import")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(&std::fs::read(&file).expect("read"))
            .expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(text(&out.stderr).contains("created 0 (0 visits), unchanged 1, refused 5"));
}

#[test]
fn an_imported_code_leaves_its_pool() {
    use vshortlink::store::prelude::*;
    use vshortlink::store::sled::{SledStore, StoreOptions};
    let mut app = TestApp::start_sled("", &[]);
    // Serving (and so handling SIGTERM) before it is stopped.
    assert_eq!(app.get("/healthz").status().as_u16(), 200);
    assert!(app.terminate().success());
    let data = app.data_path();
    let (pooled, before) = {
        let store = SledStore::open(&StoreOptions::new(&data)).expect("open");
        let head = store.pool_peek(6, 1).expect("peek");
        let (_, code) = head
            .first()
            .cloned()
            .expect("the pool of length 6 is primed");
        let before = store.pool_counts(6, u64::MAX / 2).expect("counts");
        store.close().expect("close");
        (code, before)
    };
    let file = app.dir.path().join("one.csv");
    std::fs::write(
        &file,
        format!("code,url\n{pooled},https://example.com/pooled\n"),
    )
    .expect("write");
    let out = vsl(
        &app.config_path(),
        &["import", "--format", "csv", file.to_str().expect("path")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    {
        let store = SledStore::open(&StoreOptions::new(&data)).expect("open");
        let after = store.pool_counts(6, u64::MAX / 2).expect("counts");
        assert_eq!(
            after.available + 1,
            before.available,
            "taken out of its pool"
        );
        assert!(!store.in_pool(&pooled).expect("in_pool"));
        assert!(store.may_exist(&pooled), "in the code filter");
        store.close().expect("close");
    }
    let out = vsl(&app.config_path(), &["check"]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    app.restart();
    let r = app.get(&format!("/{pooled}"));
    assert_eq!(r.status().as_u16(), 302);
}

/// Leads are personal data: an export carries them only with `--leads`; an import puts them
/// back under their link, keeping their ids, and a second import changes nothing.
#[test]
fn leads_travel_only_when_asked() {
    let mut app = TestApp::start_sled("", &[]);
    app.create(json!({
        "url": "https://example.com/offer",
        "code": "offer",
        "form": {"fields": [{"name": "phone", "label": "Phone", "type": "tel", "required": true}],
                 "retention": "30d"}
    }));
    let client = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let r = client
        .post(app.url("/offer"))
        .form(&[("phone", "+44 20 7946 0000")])
        .send()
        .expect("post");
    assert_eq!(r.status().as_u16(), 302);
    assert!(app.terminate().success());

    let plain = vsl(&app.config_path(), &["export"]);
    assert!(plain.status.success(), "{}", text(&plain.stderr));
    assert!(!text(&plain.stdout).contains("\"type\":\"lead\""));
    let out = vsl(&app.config_path(), &["export", "--leads"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let exported = text(&out.stdout);
    let lead: Value = serde_json::from_str(
        exported
            .lines()
            .find(|l| l.contains("\"type\":\"lead\""))
            .expect("a lead line"),
    )
    .expect("json");
    assert_eq!(lead["values"], json!([["phone", "+442079460000"]]));
    let link_line: Value = serde_json::from_str(
        exported
            .lines()
            .find(|l| l.contains("\"code\":\"offer\""))
            .expect("the link line"),
    )
    .expect("json");
    assert_eq!(lead["link_id"], link_line["id"]);
    assert_eq!(
        link_line["options"]["form"]["fields"][0]["name"], "phone",
        "the form travels with the link"
    );

    let file = app.dir.path().join("leads.jsonl");
    std::fs::write(&file, &exported).expect("write");
    let fresh = tempfile::tempdir().expect("dir");
    let config = offline(fresh.path());
    let first = vsl(&config, &["import", file.to_str().expect("path")]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    let second = vsl(&config, &["import", file.to_str().expect("path")]);
    assert!(
        text(&second.stderr).contains("created 0"),
        "{}",
        text(&second.stderr)
    );
    let again = vsl(&config, &["export", "--leads"]);
    let relead = text(&again.stdout)
        .lines()
        .find(|l| l.contains("\"type\":\"lead\""))
        .map(str::to_string)
        .expect("the lead is back");
    let relead: Value = serde_json::from_str(&relead).expect("json");
    assert_eq!(relead, lead, "the same lead, its id and time kept");
}

/// One link line of our export format, with `options` as stored.
fn link_line(id: u64, code: &str, options: &Value) -> String {
    json!({
        "type": "link", "id": id, "code": code, "url": format!("https://example.com/{code}"),
        "space": "default", "status": "active", "custom": true,
        "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:00Z",
        "expires_at": null, "title": null, "tags": [], "options": options,
    })
    .to_string()
}

/// A rule as stored: `when` holds every condition list (an empty one is no condition).
fn stored_rule(os: &[&str], url: &str) -> Value {
    json!({
        "when": {"device": [], "os": os, "app": [], "language": [], "country": [], "ip": [],
                 "query": [], "after": null, "before": null},
        "url": url,
    })
}

/// Options as stored, each part given or left empty.
fn stored_options(parts: Value) -> Value {
    let mut options = json!({
        "password": null, "max_visits": null, "valid_from": null, "fallback_url": null,
        "rules": [], "targets": [], "rotation": "weighted", "in_app": null, "form": null,
        "preview": null,
    });
    for (key, value) in parts.as_object().expect("parts") {
        options[key] = value.clone();
    }
    options
}

/// An import checks stored options by the API's own rules: a URL with CR/LF in any option
/// (which no redirect could send as a header), a rule without a condition, and a password
/// hash that is not Argon2id at this product's cost or lower are each refused, naming the
/// field; nothing of a refused line is written, and the good line beside them imports.
#[test]
fn import_refuses_options_the_api_refuses_naming_the_field() {
    let dir = tempfile::tempdir().expect("dir");
    let config = offline_on_test_store(dir.path());
    let hash = vshortlink::links::hash_password("hunter22").expect("hash");
    // The same salt and output with other parameters: only the parameters are judged.
    let (_, tail) = hash
        .split_once("$m=19456,t=2,p=1$")
        .expect("the product's parameters");
    let with = |params: &str| format!("$argon2id$v=19${params}${tail}");
    let crlf = "https://example.com/x\r\nSet-Cookie: a=b";
    let good = stored_options(json!({
        "password": hash,
        "fallback_url": "https://example.com/after",
        "rules": [stored_rule(&["ios"], "https://apps.example/")],
        "targets": [{"url": "https://a.example/", "weight": 2, "max_visits": null}],
        "preview": {"title": "T", "description": null, "image": "https://example.com/i.png"},
    }));
    let lines = [
        link_line(1, "good", &good),
        link_line(2, "crlf1", &stored_options(json!({ "fallback_url": crlf }))),
        link_line(
            3,
            "crlf2",
            &stored_options(json!({ "rules": [stored_rule(&["ios"], crlf)] })),
        ),
        link_line(
            4,
            "crlf3",
            &stored_options(json!({ "targets": [{"url": crlf, "weight": 1, "max_visits": null}] })),
        ),
        link_line(
            5,
            "crlf4",
            &stored_options(
                json!({ "preview": {"title": null, "description": null, "image": crlf} }),
            ),
        ),
        link_line(
            6,
            "noif",
            &stored_options(json!({ "rules": [stored_rule(&[], "https://b.example/")] })),
        ),
        link_line(
            7,
            "gib",
            &stored_options(json!({ "password": with("m=1048576,t=2,p=1") })),
        ),
        link_line(
            8,
            "slow",
            &stored_options(json!({ "password": with("m=19456,t=100,p=1") })),
        ),
        link_line(
            9,
            "wide",
            &stored_options(json!({ "password": with("m=19456,t=2,p=4") })),
        ),
        link_line(
            10,
            "argi",
            &stored_options(json!({ "password": hash.replacen("argon2id", "argon2i", 1) })),
        ),
        link_line(
            11,
            "late",
            &stored_options(json!({ "valid_from": u64::MAX })),
        ),
    ];
    let file = dir.path().join("in.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").expect("write");
    let out = vsl(&config, &["import", file.to_str().expect("path")]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    for (line, field) in [
        (2, "options.fallback_url"),
        (3, "options.rules[0].url"),
        (4, "options.targets[0].url"),
        (5, "options.preview.image"),
        (6, "options.rules[0].when"),
        (7, "options.password"),
        (8, "options.password"),
        (9, "options.password"),
        (10, "options.password"),
        (11, "options.valid_from"),
    ] {
        assert!(
            err.contains(&format!("line {line}: refused: `{field}`: ")),
            "line {line} names `{field}`: {err}"
        );
    }
    assert!(err.contains("m=1048576 KiB"), "{err}");
    assert!(err.contains("t=100"), "{err}");
    assert!(
        err.contains("read 11, created 1 (0 visits), unchanged 0, refused 10"),
        "{err}"
    );
    // Only the good line is in the store, and it redirects as written.
    let out = vsl(&config, &["export"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let links: Vec<Value> = text(&out.stdout)
        .lines()
        .filter(|l| l.contains("\"type\":\"link\""))
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(links.len(), 1, "{links:?}");
    assert_eq!(links[0]["code"], "good");
    assert_eq!(links[0]["options"], good);
}
