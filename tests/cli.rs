//! `vshortlink check`, `create` and `stats` with the real binary: a clean store passes, planted
//! faults are named; create and stats work offline and through a running server's API.
//!
//! Planting a fault needs to write the trees behind the store's back, so this file (and only
//! it) opens the data directory with sled itself.

mod common;

use std::process::Output;

use common::cli::{offline, text, vsl};
use common::{TestApp, ADMIN};
use serde_json::Value;

fn json_out(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json output")
}

#[test]
fn create_and_stats_offline_then_check_finds_planted_faults() {
    let dir = tempfile::tempdir().expect("dir");
    let config = offline(dir.path());
    let custom = json_out(&vsl(
        &config,
        &["create", "https://example.com/a", "--code", "abc"],
    ));
    assert_eq!(custom["code"], "abc");
    assert_eq!(custom["short_url"], "http://sl.test/abc");
    assert_eq!(custom["created"], true);
    let generated = json_out(&vsl(
        &config,
        &[
            "create",
            "https://example.com/b",
            "--length",
            "5",
            "--ttl",
            "3600",
        ],
    ));
    let code = generated["code"].as_str().expect("code").to_string();
    assert_eq!(code.len(), 5);
    assert!(generated["expires_at"].is_string());
    let again = json_out(&vsl(
        &config,
        &["create", "https://example.com/b", "--length", "5"],
    ));
    assert_eq!(again["created"], false, "dedup");
    let taken = vsl(
        &config,
        &["create", "https://example.com/x", "--code", "abc"],
    );
    assert!(!taken.status.success());
    assert!(text(&taken.stderr).contains("already taken"));

    let stats = json_out(&vsl(&config, &["stats", "abc"]));
    assert_eq!(stats["url"], "https://example.com/a");
    assert_eq!(stats["visits_total"], 0);
    let all = json_out(&vsl(&config, &["stats"]));
    assert_eq!(all["links"]["active"], 2);

    // A clean store passes, saying what it checked.
    let out = vsl(&config, &["check"]);
    let report = text(&out.stdout);
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains("checked: 2 active links against the active mapping"),
        "{report}"
    );
    assert!(
        report.contains("pooled codes: none owned by a link"),
        "{report}"
    );
    assert!(report.contains("ok: no fault found"), "{report}");

    // Plant faults: the live code `abc` also sits in pool 3, and the generated link loses its
    // redirect entry.
    {
        let db = sled::open(dir.path().join("data/db")).expect("open sled");
        let pool = db.open_tree("pool/3").expect("pool tree");
        let mut key = 0u64.to_be_bytes().to_vec();
        key.extend_from_slice(b"abc");
        pool.insert(key, &[][..]).expect("insert");
        // Its code index entry keeps the owner's id but no redirect entry.
        db.open_tree("codes")
            .expect("codes")
            .insert(code.as_bytes(), &2u64.to_be_bytes()[..])
            .expect("insert");
        db.flush().expect("flush");
    }
    let out = vsl(&config, &["check"]);
    let report = text(&out.stdout);
    assert!(!out.status.success(), "{report}");
    assert!(
        report.contains("FAULT: pooled and live: `abc` sits in pool 3 and is owned by a link"),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "FAULT: active mapping: active link 2 (`{code}`) is missing from the active mapping"
        )),
        "{report}"
    );
    assert!(report.contains("2 fault(s) found"), "{report}");
}

#[test]
fn create_and_stats_through_a_running_server() {
    let app = TestApp::start_sled("", &[]);
    let server = format!("http://{}", app.addr);
    let config = app.config_path();
    let made = json_out(&vsl(
        &config,
        &[
            "create",
            "https://example.com/remote",
            "--code",
            "rem",
            "--server",
            &server,
            "--key",
            ADMIN,
        ],
    ));
    assert_eq!(made["code"], "rem");
    assert_eq!(made["created"], true);
    let stats = json_out(&vsl(
        &config,
        &["stats", "rem", "--server", &server, "--key", ADMIN],
    ));
    assert_eq!(stats["url"], "https://example.com/remote");
    assert_eq!(stats["visits_total"], 0);
    let all = json_out(&vsl(
        &config,
        &["stats", "--server", &server, "--key", ADMIN],
    ));
    assert_eq!(all["links"]["active"], 1);
    let denied = vsl(
        &config,
        &["stats", "--server", &server, "--key", "wrong-key-0000"],
    );
    assert!(!denied.status.success());
    assert!(text(&denied.stderr).contains("401"));
    // Offline against the running server's directory: refused at once.
    let out = vsl(&config, &["check"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("in use by a running vshortlink server"));
}

/// `create --domain HOST` (SPEC §26) through a running server and offline against its stopped
/// store: the link goes on that domain (its short URL on the domain's host), the same code
/// stays free on the default domain, and a host no domain has is refused naming `domain`.
#[test]
fn create_takes_a_domain_through_a_server_and_offline() {
    let mut app = TestApp::binary();
    let added = app
        .req(reqwest::Method::POST, "/api/v1/domains", Some(ADMIN))
        .json(&serde_json::json!({"host": "go.c.com"}))
        .send()
        .expect("add domain");
    assert_eq!(added.status(), 201);
    let server = format!("http://{}", app.addr);
    let config = app.config_path();
    let made = json_out(&vsl(
        &config,
        &[
            "create",
            "https://example.com/srv",
            "--code",
            "srv",
            "--domain",
            "go.c.com",
            "--server",
            &server,
            "--key",
            ADMIN,
        ],
    ));
    assert_eq!(made["domain"], "go.c.com");
    assert_eq!(made["short_url"], "http://go.c.com/srv");
    let refused = vsl(
        &config,
        &[
            "create",
            "https://example.com/x",
            "--domain",
            "nope.example",
            "--server",
            &server,
            "--key",
            ADMIN,
        ],
    );
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("400"),
        "{}",
        text(&refused.stderr)
    );
    assert!(app.terminate().success());

    let taken = vsl(
        &config,
        &[
            "create",
            "https://example.com/off",
            "--code",
            "srv",
            "--domain",
            "GO.C.com",
        ],
    );
    assert!(!taken.status.success(), "srv is taken on go.c.com");
    assert!(
        text(&taken.stderr).contains("already taken"),
        "{}",
        text(&taken.stderr)
    );
    let off = json_out(&vsl(
        &config,
        &[
            "create",
            "https://example.com/off",
            "--code",
            "off",
            "--domain",
            "go.c.com",
        ],
    ));
    assert_eq!(off["created"], true);
    assert_eq!(off["domain"], "go.c.com");
    assert_eq!(off["short_url"], "http://go.c.com/off");
    let home = json_out(&vsl(
        &config,
        &["create", "https://example.com/home", "--code", "off"],
    ));
    assert_eq!(home["created"], true, "the same code on the default domain");
    assert_eq!(home["domain"], "sl.test");
    assert_eq!(home["short_url"], "http://sl.test/off");
    let refused = vsl(
        &config,
        &[
            "create",
            "https://example.com/x",
            "--domain",
            "nope.example",
        ],
    );
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("domain"),
        "{}",
        text(&refused.stderr)
    );

    // `stats CODE --domain HOST` reads the code on that domain; without it, the default's.
    let there = json_out(&vsl(&config, &["stats", "off", "--domain", "go.c.com"]));
    assert_eq!(there["url"], "https://example.com/off");
    assert_eq!(there["visits_total"], 0);
    let here = json_out(&vsl(&config, &["stats", "off"]));
    assert_eq!(here["url"], "https://example.com/home");
    let unknown = vsl(&config, &["stats", "off", "--domain", "nope.example"]);
    assert!(!unknown.status.success());
    app.respawn();
    let server = format!("http://{}", app.addr);
    let remote = json_out(&vsl(
        &config,
        &[
            "stats", "srv", "--domain", "go.c.com", "--server", &server, "--key", ADMIN,
        ],
    ));
    assert_eq!(remote["url"], "https://example.com/srv");
}

/// On PostgreSQL, `check` verifies what the database's constraints do not: no pooled code is
/// owned by a link, link id segments and the id sequences are past every id, the status
/// counters match the rows. A clean database passes (exit 0); planted faults are each named
/// (exit 1).
#[test]
fn check_on_postgres_passes_a_clean_database_and_names_planted_faults() {
    let Some(server) = common::postgres::server() else {
        eprintln!("skipped: `check` on PostgreSQL needs PostgreSQL");
        return;
    };
    let url = server.create_database();
    let database = url.rsplit('/').next().expect("database name").to_string();
    let dir = tempfile::tempdir().expect("dir");
    let config = offline(dir.path());
    let mut toml = std::fs::read_to_string(&config).expect("config");
    toml.push_str(&format!(
        "backend = \"postgres\"\n[storage.postgres]\nurl = \"{url}\"\n"
    ));
    std::fs::write(&config, toml).expect("config");
    let made = json_out(&vsl(
        &config,
        &["create", "https://example.com/a", "--code", "abc"],
    ));
    assert_eq!(made["created"], true);
    json_out(&vsl(
        &config,
        &["create", "https://example.com/b", "--length", "5"],
    ));

    let out = vsl(&config, &["check"]);
    let report = text(&out.stdout);
    assert!(out.status.success(), "{report}\n{}", text(&out.stderr));
    assert!(report.contains("checked: "), "{report}");
    assert!(
        report.contains("pooled codes: none owned by a link"),
        "{report}"
    );
    assert!(report.contains("ok: no fault found"), "{report}");

    // Plant faults the schema lets through: the live code `abc` also waits in pool 3, the
    // link id segments fall behind the links' ids, the active counter drifts, and a cap's
    // claim names no link.
    server.sql(
        &database,
        "INSERT INTO pool (code, length, score, tiebreak) VALUES ('abc', 3, 0, 0);
         UPDATE id_blocks SET next = 1 WHERE name = 'link';
         INSERT INTO counters (name, shard, n) VALUES ('links:active', 9999, 5);
         INSERT INTO link_claims (link_id, slot, used) VALUES (424242, 0, 1)",
    );
    let out = vsl(&config, &["check"]);
    let report = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{report}\n{}",
        text(&out.stderr)
    );
    assert!(
        report.contains("FAULT: pooled and live: `abc` sits in pool 3 and is owned by link"),
        "{report}"
    );
    assert!(
        report.contains("FAULT: id segments: the next link id is 1, not past the highest id"),
        "{report}"
    );
    assert!(
        report.contains("FAULT: counters: links:active: the counter says 7, the rows 2"),
        "{report}"
    );
    assert!(
        report.contains(
            "FAULT: belonging rows: 1 row(s) of `link_claims` name a link that does not exist"
        ),
        "{report}"
    );
    assert!(report.contains("4 fault(s) found"), "{report}");
}
