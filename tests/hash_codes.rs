//! Computed codes and the check character through the real binary: the `hash` strategy (the same URL gets the same
//! code, computed from the URL and the store's secret derived per space, so that what one space
//! holds says nothing to another; all four owned → a random code) and the check character (a one-character typo of a real
//! code is a 404 without a cache or store lookup; custom codes of a check length are refused
//! everywhere; `vshortlink check` verifies every stored code of a check tier). The default
//! configuration's tier 7 is `hash` with `check = true`.

mod common;

use common::cli::{text, vsl};
use common::{problem, TestApp, ADMIN};
use serde_json::{json, Value};
use vshortlink::codes::{check, hash, ALPHABET};

/// Without the 404 quota: the typo test sends hundreds of unknown codes from one address.
const NO_404_LIMIT: &str = "[limits.rates]\nnot_found_per_ip = \"off\"\n";

fn create7(app: &TestApp, url: &str, space: &str) -> (u16, Value) {
    let r = app.post_json(
        "/api/v1/links",
        ADMIN,
        &json!({"url": url, "length": 7, "space": space}),
    );
    let status = r.status().as_u16();
    (status, r.json().expect("json"))
}

/// The store's `hash` secret, read from an export of the stopped store (it travels with it).
fn secret_of(app: &mut TestApp) -> Vec<u8> {
    assert!(app.terminate().success());
    let out = vsl(&app.config_path(), &["export"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    app.respawn();
    let export = text(&out.stdout);
    let line: Value = export
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("json line"))
        .find(|l| l["type"] == "key" && l["name"] == "hash_secret")
        .expect("the export carries the hash secret");
    hex::decode(line["value"].as_str().expect("hex")).expect("hex")
}

/// The four codes the `hash` strategy computes for `url` in `space`, with their check
/// characters.
fn expected(url: &str, secret: &[u8], space: &str) -> Vec<String> {
    hash::candidates(url, &hash::space_secret(secret, space))
        .iter()
        .map(|c| check::with_check(c).expect("alphabet"))
        .collect()
}

#[test]
fn the_same_url_gets_the_same_computed_code_and_each_space_its_own() {
    let mut app = TestApp::start_with(NO_404_LIMIT, &[]);
    let secret = secret_of(&mut app);
    let url = "https://example.com/design/002";
    let codes = expected(url, &secret, "default");

    let (status, first) = create7(&app, url, "default");
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["code"], codes[0].as_str(), "the first candidate");
    assert_eq!(first["length"], 7);
    let (status, again) = create7(&app, url, "default");
    assert_eq!(status, 200, "dedup: {again}");
    assert_eq!(again["code"], codes[0].as_str());
    assert_eq!(again["created"], false);

    // Other spaces: candidates of their own, so the first one of each, whatever other spaces
    // hold (a caller limited to one space learns nothing of the others).
    let mut made_codes = vec![codes[0].clone()];
    for space in ["sports", "billing", "news"] {
        let (status, made) = create7(&app, url, space);
        assert_eq!(status, 201, "{made}");
        let theirs = expected(url, &secret, space);
        assert_eq!(made["code"], theirs[0].as_str(), "space {space}");
        made_codes.push(theirs[0].clone());
    }
    for code in &made_codes {
        let r = app.get(&format!("/{code}"));
        assert_eq!(r.status(), 302, "{code}");
        assert_eq!(r.headers()["location"], url);
    }

    // The pools API and the dashboard: no pool, nothing available.
    let pools = app.api_get("/api/v1/pools", ADMIN);
    let seven = pools["pools"]
        .as_array()
        .expect("pools")
        .iter()
        .find(|p| p["length"] == 7)
        .expect("tier 7 is listed")
        .clone();
    assert_eq!(seven["strategy"], "hash");
    assert_eq!(seven["check"], true);
    assert!(seven["available"].is_null(), "{seven}");
}

#[test]
fn a_space_whose_four_candidates_are_owned_gets_a_random_code() {
    // A `hash` tier without a check character, so that custom codes of its length can own
    // the candidates first.
    let mut app = TestApp::start_with(
        &format!("{NO_404_LIMIT}[tiers.6]\nstrategy = \"hash\"\nttl = \"7d\"\n"),
        &[],
    );
    let secret = secret_of(&mut app);
    let url = "https://example.com/crowded";
    let candidates = hash::candidates(url, &hash::space_secret(&secret, "default"));
    for (i, code) in candidates.iter().enumerate() {
        let r = app.post_json(
            "/api/v1/links",
            ADMIN,
            &json!({"url": format!("https://example.com/owner/{i}"), "code": code}),
        );
        assert_eq!(r.status(), 201, "{code}");
    }
    let r = app.post_json("/api/v1/links", ADMIN, &json!({"url": url, "length": 6}));
    assert_eq!(r.status(), 201);
    let made: Value = r.json().expect("json");
    let code = made["code"].as_str().expect("code");
    assert_eq!(code.len(), 6);
    assert!(!candidates.iter().any(|c| c == code), "{code}");
    // Another space's candidates are its own: its first is free.
    let r = app.post_json(
        "/api/v1/links",
        ADMIN,
        &json!({"url": url, "length": 6, "space": "sports"}),
    );
    assert_eq!(r.status(), 201);
    let theirs: Value = r.json().expect("json");
    assert_eq!(
        theirs["code"],
        hash::candidates(url, &hash::space_secret(&secret, "sports"))[0].as_str()
    );
}

#[test]
fn every_one_character_typo_of_a_real_code_is_a_404_without_any_lookup() {
    let app = TestApp::start_with(NO_404_LIMIT, &[]);
    let (status, made) = create7(&app, "https://example.com/poster", "default");
    assert_eq!(status, 201);
    let code = made["code"].as_str().expect("code").to_string();
    assert_eq!(app.get(&format!("/{code}")).status(), 302);
    let lookups = || app.metric("vsl_cache_hits_total") + app.metric("vsl_cache_misses_total");
    let before = lookups();
    assert!(before >= 1.0, "the cache metrics are there");
    let mut typos = 0;
    for i in 0..code.len() {
        for &other in ALPHABET.iter().filter(|&&b| b != code.as_bytes()[i]) {
            let mut typo = code.clone().into_bytes();
            typo[i] = other;
            let typo = String::from_utf8(typo).expect("ascii");
            let r = app.get(&format!("/{typo}"));
            assert_eq!(r.status(), 404, "{typo}");
            typos += 1;
        }
    }
    assert_eq!(typos, 7 * 61);
    assert_eq!(
        lookups(),
        before,
        "a code failing its check reached the cache (and so could reach the store)"
    );
    // JSON clients get the problem too.
    let r = app
        .client
        .get(app.url(&format!(
            "/{}{}",
            &code[..6],
            if code.ends_with('0') { '1' } else { '0' }
        )))
        .header("accept", "application/json")
        .send()
        .expect("get");
    assert_eq!(problem(r, 404)["code"], "not_found");
}

#[test]
fn custom_codes_of_a_check_length_are_refused_on_every_path() {
    let app = TestApp::binary();
    let p = problem(
        app.post_json(
            "/api/v1/links",
            ADMIN,
            &json!({"url": "https://example.com/c", "code": "abcdefg"}),
        ),
        400,
    );
    assert_eq!(p["code"], "invalid_code");
    assert_eq!(p["field"], "code");
    assert!(
        p["detail"]
            .as_str()
            .unwrap_or("")
            .contains("check character"),
        "{p}"
    );
    // A valid check character does not make a custom code acceptable either.
    let valid = check::with_check("abcdef").expect("alphabet");
    let p = problem(
        app.post_json(
            "/api/v1/links",
            ADMIN,
            &json!({"url": "https://example.com/c", "code": valid}),
        ),
        400,
    );
    assert_eq!(p["code"], "invalid_code");
    let batch: Value = app
        .post_json(
            "/api/v1/links/batch",
            ADMIN,
            &json!({"links": [{"url": "https://example.com/b", "code": "bbbbbbb"}]}),
        )
        .json()
        .expect("json");
    assert_eq!(batch["results"][0]["error"]["code"], "invalid_code");
    let r = app
        .client
        .get(app.url("/yourls-api.php"))
        .query(&[
            ("signature", ADMIN),
            ("format", "json"),
            ("action", "shorturl"),
            ("url", "https://example.com/y"),
            ("keyword", "yyyyyyy"),
        ])
        .send()
        .expect("yourls");
    let body: Value = r.json().expect("json");
    assert_eq!(body["status"], "fail", "{body}");
    // An import obeys the same rule: a custom record of 7 characters is refused, a generated
    // one must pass its check.
    let mut app = app;
    assert!(app.terminate().success());
    let line = |code: &str, custom: bool| {
        json!({"type": "link", "id": 0, "code": code, "url": format!("https://example.com/i/{code}"),
            "space": "default", "status": "active", "custom": custom,
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            "expires_at": null, "title": null, "tags": []})
        .to_string()
    };
    let good = check::with_check("impor1").expect("alphabet");
    let bad = format!(
        "{}{}",
        &good[..6],
        if good.ends_with('0') { '1' } else { '0' }
    );
    let file = app.dir.path().join("seven.jsonl");
    std::fs::write(
        &file,
        [line("custom7", true), line(&bad, false), line(&good, false)].join("\n"),
    )
    .expect("write");
    let out = vsl(
        &app.config_path(),
        &["import", file.to_str().expect("path")],
    );
    let report = text(&out.stderr);
    assert!(
        report.contains("created 1") && report.contains("refused 2"),
        "{report}"
    );
    assert!(report.contains("check character"), "{report}");
    app.respawn();
    assert_eq!(app.get(&format!("/{good}")).status(), 302);
    // Six and eight characters are other lengths: fine.
    for code in ["abcdef", "abcdefgh"] {
        let r = app.post_json(
            "/api/v1/links",
            ADMIN,
            &json!({"url": format!("https://example.com/{code}"), "code": code}),
        );
        assert_eq!(r.status(), 201, "{code}");
    }
    assert_eq!(app.link_total(), 3);
}

#[test]
fn the_secret_moves_with_the_store_and_check_verifies_check_codes() {
    let mut app = TestApp::start_sled("", &[]);
    let (_, first) = create7(&app, "https://example.com/moved/1", "default");
    assert!(app.terminate().success());
    let export = app.dir.path().join("export.jsonl");
    let out = vsl(
        &app.config_path(),
        &["export", "--output", export.to_str().expect("path")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    app.respawn();
    let (_, second) = create7(&app, "https://example.com/moved/2", "default");

    // A fresh store with the export: the same secret, so the same code for a new URL.
    let mut moved = TestApp::start_sled("", &[]);
    assert!(moved.terminate().success());
    std::fs::remove_dir_all(moved.data_path()).expect("fresh data dir");
    let out = vsl(
        &moved.config_path(),
        &["import", export.to_str().expect("path")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    moved.respawn();
    let (_, again) = create7(&moved, "https://example.com/moved/2", "default");
    assert_eq!(
        again["code"], second["code"],
        "the same code in the moved store"
    );
    let link = moved.api_get(
        &format!("/api/v1/links/{}", first["code"].as_str().expect("code")),
        ADMIN,
    );
    assert_eq!(link["url"], "https://example.com/moved/1");

    // `check` verifies every code of a check length.
    assert!(moved.terminate().success());
    let out = vsl(&moved.config_path(), &["check"]);
    let report = text(&out.stdout);
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains("2 codes of the check lengths (7) against their check character"),
        "{report}"
    );
    // Turning `check` on for a length that already has codes: `check` names each one that
    // fails (it no longer redirects), and new codes of the length carry the character.
    let old = "ckfail08";
    assert!(!check::passes(old), "pick a code that fails its check");
    moved.respawn();
    let r = moved.post_json(
        "/api/v1/links",
        ADMIN,
        &json!({"url": "https://example.com/old8", "code": old}),
    );
    assert_eq!(r.status(), 201);
    assert!(moved.terminate().success());
    moved.set_extra("[tiers.8]\nstrategy = \"random\"\nttl = \"7d\"\ncheck = true\n");
    let out = vsl(&moved.config_path(), &["check"]);
    let report = text(&out.stdout);
    assert!(!out.status.success(), "{report}");
    assert!(
        report.contains("`ckfail08`") && report.contains("fails the check of length 8"),
        "{report}"
    );
    moved.respawn();
    assert_eq!(moved.get(&format!("/{old}")).status(), 404);
    let r = moved.post_json(
        "/api/v1/links",
        ADMIN,
        &json!({"url": "https://example.com/eight", "length": 8}),
    );
    assert_eq!(r.status(), 201);
    let eight: Value = r.json().expect("json");
    let code = eight["code"].as_str().expect("code").to_string();
    assert_eq!(code.len(), 8);
    assert!(check::passes(&code), "{code}");
    assert_eq!(moved.get(&format!("/{code}")).status(), 302);
}
