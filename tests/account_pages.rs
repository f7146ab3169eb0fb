//! People on the pages, black-box on the real binary (sled, or PostgreSQL with
//! `TEST_STORE=postgres`): signing in with a password through the form, changing it (the other
//! session ends, this one goes on), making a key on `/ui/account` (shown once, good on the API)
//! and revoking it (the API refuses it), an admin adding a user and disabling them (their
//! session ends), the last admin kept, teams made and joined on the pages, the wall between
//! teams on `/ui/teams/{slug}`, `/ui/links`, a link's page and the dashboard, the audit page,
//! and a form without its token refused.

mod common;

use common::pages::{csrf_of, location, PageClient};
use common::{TestApp, ADMIN};
use serde_json::{json, Value};

/// Makes a user through the API (the config admin key); their id.
fn add_user(app: &TestApp, email: &str, password: &str, role: &str) -> String {
    let response = app.post_json(
        "/api/v1/users",
        ADMIN,
        &json!({"email": email, "password": password, "role": role, "name": email.split('@').next()}),
    );
    assert_eq!(response.status(), 201);
    let body: Value = response.json().expect("user");
    body["id"].as_str().expect("id").to_string()
}

/// A browser signed in with a password through the login form.
fn sign_in<'a>(app: &'a TestApp, email: &str, password: &str) -> PageClient<'a> {
    let page = PageClient::new(app);
    let response = page.post_form(
        "/ui/login",
        &[
            ("email", email),
            ("password", password),
            ("next", "/ui/account"),
        ],
    );
    assert_eq!(response.status(), 303, "{email} signs in");
    assert_eq!(location(&response), "/ui/account");
    page
}

/// Posts a form with the token of the page at `from` (the session's).
fn post(
    page: &PageClient,
    from: &str,
    path: &str,
    fields: &[(&str, &str)],
) -> reqwest::blocking::Response {
    let token = page.csrf(from);
    let mut all = vec![("csrf", token.as_str())];
    all.extend_from_slice(fields);
    page.client
        .post(page.app.url(path))
        .form(&all)
        .send()
        .expect("POST")
}

fn signed_in(page: &PageClient) -> bool {
    page.get("/ui/account").status() == 200
}

/// The new key shown on the page after making one.
fn shown_key(html: &str) -> String {
    let marker = "id=\"new-key\" class=\"secret\" value=\"";
    let start = html.find(marker).expect("the new key on the page") + marker.len();
    let end = html[start..].find('"').expect("end") + start;
    html[start..end].to_string()
}

#[test]
fn a_person_signs_in_changes_the_password_and_makes_and_revokes_a_key() {
    let app = TestApp::binary_with("", &[]);
    let ann = add_user(&app, "ann@example.com", "ann-password-0001", "member");

    // A member of no team signs in and reaches her account, and no link.
    let teamless = PageClient::new(&app);
    let response = teamless.post_form(
        "/ui/login",
        &[
            ("email", "ann@example.com"),
            ("password", "ann-password-0001"),
        ],
    );
    assert_eq!(response.status(), 303);
    assert_eq!(teamless.get("/ui/account").status(), 200);
    let made = app.post_json("/api/v1/teams", ADMIN, &json!({"slug": "ops"}));
    assert_eq!(made.status(), 201);
    let joined = app
        .req(
            reqwest::Method::PUT,
            &format!("/api/v1/teams/ops/members/{ann}"),
            Some(ADMIN),
        )
        .json(&json!({"role": "editor"}))
        .send()
        .expect("PUT");
    assert_eq!(joined.status(), 200);

    // A wrong password: 401, the form again with the message, nobody signed in.
    let stranger = PageClient::new(&app);
    let wrong = stranger.post_form(
        "/ui/login",
        &[
            ("email", "ann@example.com"),
            ("password", "not-her-password"),
        ],
    );
    assert_eq!(wrong.status(), 401);
    let html = wrong.text().expect("body");
    assert!(html.contains("do not match"), "{html}");
    assert!(!signed_in(&stranger));

    let first = sign_in(&app, "ann@example.com", "ann-password-0001");
    let other = sign_in(&app, "ann@example.com", "ann-password-0001");
    let account = first.html("/ui/account", 200);
    assert!(account.contains("ann@example.com") && account.contains("Change password"));

    // A wrong current password, a new one too short: errors by their fields, nothing changed.
    let refused = post(
        &first,
        "/ui/account",
        "/ui/account/password",
        &[("current", "nope-nope-nope"), ("new", "ann-password-0002")],
    );
    assert_eq!(refused.status(), 401);
    assert!(refused
        .text()
        .expect("body")
        .contains("current password is wrong"));
    let short = post(
        &first,
        "/ui/account",
        "/ui/account/password",
        &[("current", "ann-password-0001"), ("new", "short")],
    );
    assert_eq!(short.status(), 400);
    assert!(short.text().expect("body").contains("id=\"new-error\""));
    assert!(signed_in(&other));

    // The change: this session goes on under a new cookie, the other one ends.
    let changed = post(
        &first,
        "/ui/account",
        "/ui/account/password",
        &[
            ("current", "ann-password-0001"),
            ("new", "ann-password-0002"),
        ],
    );
    assert_eq!(changed.status(), 303);
    assert_eq!(location(&changed), "/ui/account?done=password");
    assert!(first
        .html("/ui/account?done=password", 200)
        .contains("Your password was changed"));
    assert!(!signed_in(&other), "the other session ended");
    let old = PageClient::new(&app);
    let response = old.post_form(
        "/ui/login",
        &[
            ("email", "ann@example.com"),
            ("password", "ann-password-0001"),
        ],
    );
    assert_eq!(response.status(), 401);
    sign_in(&app, "ann@example.com", "ann-password-0002");

    // A key: shown once, good on the API as Ann.
    let made = post(
        &first,
        "/ui/account",
        "/ui/account/keys",
        &[
            ("name", "deploy script"),
            ("role", "editor"),
            ("team", ""),
            ("expires", ""),
        ],
    );
    assert_eq!(made.status(), 200);
    let html = made.text().expect("body");
    let key = shown_key(&html);
    assert!(key.starts_with("vsl_"), "{key}");
    assert!(html.contains("data-copy=\"new-key\""), "a copy button");
    let later = first.html("/ui/account", 200);
    assert!(
        later.contains("deploy script") && !later.contains(&key),
        "shown once only"
    );
    let me = app.api_get("/api/v1/me", &key);
    assert_eq!(me["kind"], "key");
    assert_eq!(me["user"]["email"], "ann@example.com");
    // A key stronger than Ann (a member): refused next to the role.
    let stronger = post(
        &first,
        "/ui/account",
        "/ui/account/keys",
        &[("name", "too much"), ("role", "admin")],
    );
    assert_eq!(stronger.status(), 403);
    assert!(stronger
        .text()
        .expect("body")
        .contains("id=\"key-role-error\""));
    // A date in the past: next to the expiry.
    let past = post(
        &first,
        "/ui/account",
        "/ui/account/keys",
        &[("name", "old"), ("expires", "2001-01-01")],
    );
    assert_eq!(past.status(), 400);
    assert!(past
        .text()
        .expect("body")
        .contains("id=\"key-expires-error\""));

    // Revoked on the page: the API refuses it at once.
    let id = key.split('_').nth(1).expect("key id").to_string();
    let revoked = post(
        &first,
        "/ui/account",
        &format!("/ui/keys/{id}/revoke"),
        &[("back", "/ui/account?done=revoked")],
    );
    assert_eq!(revoked.status(), 303);
    assert_eq!(location(&revoked), "/ui/account?done=revoked");
    let refused = app
        .req(reqwest::Method::GET, "/api/v1/me", Some(&key))
        .send()
        .expect("GET");
    assert_eq!(refused.status(), 401);

    // Forms without their token: 403, nothing done.
    let no_token = first.post_raw("/ui/account/keys", &[("name", "sneaky")]);
    assert_eq!(no_token.status(), 403);
    let no_token = first.post_raw(
        "/ui/account/password",
        &[
            ("current", "ann-password-0002"),
            ("new", "ann-password-0003"),
        ],
    );
    assert_eq!(no_token.status(), 403);
    assert!(!first.html("/ui/account", 200).contains("sneaky"));
    sign_in(&app, "ann@example.com", "ann-password-0002");
}

#[test]
fn admins_manage_people_and_teams_and_a_team_sees_only_its_own_links() {
    let app = TestApp::binary_with("", &[]);
    let root_id = add_user(&app, "root@example.com", "root-password-0001", "admin");
    let admin = sign_in(&app, "root@example.com", "root-password-0001");
    let users = admin.html("/ui/admin/users", 200);
    assert!(users.contains("root@example.com"));

    // Adding a user: errors next to their fields, then added.
    let bad = post(
        &admin,
        "/ui/admin/users",
        "/ui/admin/users",
        &[
            ("email", "not-an-email"),
            ("password", "bob-password-0001"),
            ("role", "member"),
        ],
    );
    assert_eq!(bad.status(), 400);
    let html = bad.text().expect("body");
    assert!(
        html.contains("id=\"email-error\"") && html.contains("value=\"not-an-email\""),
        "{html}"
    );
    let short = post(
        &admin,
        "/ui/admin/users",
        "/ui/admin/users",
        &[
            ("email", "bob@example.com"),
            ("password", "short"),
            ("role", "member"),
        ],
    );
    assert_eq!(short.status(), 400);
    assert!(short
        .text()
        .expect("body")
        .contains("id=\"password-error\""));
    let added = post(
        &admin,
        "/ui/admin/users",
        "/ui/admin/users",
        &[
            ("email", "bob@example.com"),
            ("name", "Bob"),
            ("password", "bob-password-0001"),
            ("role", "member"),
        ],
    );
    assert_eq!(added.status(), 303);
    let again = post(
        &admin,
        "/ui/admin/users",
        "/ui/admin/users",
        &[
            ("email", "BOB@example.com"),
            ("password", "bob-password-0001"),
        ],
    );
    assert_eq!(again.status(), 409);
    assert!(again
        .text()
        .expect("body")
        .contains("Someone already has this email"));

    // Teams made on the pages; Bob joins red by his email.
    for slug in ["red", "blue"] {
        let made = post(
            &admin,
            "/ui/teams",
            "/ui/teams",
            &[
                ("slug", slug),
                ("name", &format!("Team {slug}")),
                ("plan", ""),
            ],
        );
        assert_eq!(made.status(), 303);
        assert_eq!(location(&made), format!("/ui/teams/{slug}?done=created"));
    }
    let nobody = post(
        &admin,
        "/ui/teams/red",
        "/ui/teams/red/members",
        &[
            ("action", "add"),
            ("email", "nobody@example.com"),
            ("role", "editor"),
        ],
    );
    assert_eq!(nobody.status(), 400);
    assert!(nobody
        .text()
        .expect("body")
        .contains("Nobody has this email here"));
    let joined = post(
        &admin,
        "/ui/teams/red",
        "/ui/teams/red/members",
        &[
            ("action", "add"),
            ("email", "bob@example.com"),
            ("role", "editor"),
        ],
    );
    assert_eq!(joined.status(), 303);
    assert!(admin.html("/ui/teams/red", 200).contains("bob@example.com"));

    // Bob signs in; disabled by the admin, his session ends and he cannot sign in.
    let bob = sign_in(&app, "bob@example.com", "bob-password-0001");
    let bob_id = app.api_get("/api/v1/users", ADMIN)["users"]
        .as_array()
        .expect("users")
        .iter()
        .find(|u| u["email"] == "bob@example.com")
        .and_then(|u| u["id"].as_str())
        .expect("bob")
        .to_string();
    let disabled = post(
        &admin,
        "/ui/admin/users",
        &format!("/ui/admin/users/{bob_id}"),
        &[("action", "disable")],
    );
    assert_eq!(disabled.status(), 303);
    assert!(!signed_in(&bob), "a disabled user's session ends");
    let refused = PageClient::new(&app).post_form(
        "/ui/login",
        &[
            ("email", "bob@example.com"),
            ("password", "bob-password-0001"),
        ],
    );
    assert_eq!(refused.status(), 401);
    let enabled = post(
        &admin,
        "/ui/admin/users",
        &format!("/ui/admin/users/{bob_id}"),
        &[("action", "enable")],
    );
    assert_eq!(enabled.status(), 303);
    // Bob is no admin: the users page is not his.
    let bob = sign_in(&app, "bob@example.com", "bob-password-0001");
    assert_eq!(bob.get("/ui/admin/users").status(), 403);
    assert!(
        !bob.html("/ui/links", 200).contains("/ui/admin/users"),
        "no link to it either"
    );

    // The last admin cannot demote or disable themself (409, said on the row).
    let last = post(
        &admin,
        "/ui/admin/users",
        &format!("/ui/admin/users/{root_id}"),
        &[("action", "role"), ("role", "member")],
    );
    assert_eq!(last.status(), 409);
    assert!(last.text().expect("body").contains("last enabled admin"));
    let last = post(
        &admin,
        "/ui/admin/users",
        &format!("/ui/admin/users/{root_id}"),
        &[("action", "disable")],
    );
    assert_eq!(last.status(), 409);
    assert!(signed_in(&admin));

    // Links in each team's space.
    app.create(json!({"url": "https://red.example.com/plan", "code": "redplan1", "space": "red"}));
    app.create(
        json!({"url": "https://blue.example.com/secret", "code": "bluesecret", "space": "blue"}),
    );

    // Bob (red) never sees blue: its team page, its links on the list, a link's page, the
    // dashboard.
    let red = bob.html("/ui/teams/red", 200);
    assert!(
        red.contains("bob@example.com") && !red.contains("Add a member"),
        "an editor does not manage"
    );
    assert_eq!(bob.get("/ui/teams/blue").status(), 404);
    let blue_join = post(
        &bob,
        "/ui/teams/red",
        "/ui/teams/blue/members",
        &[
            ("action", "add"),
            ("email", "bob@example.com"),
            ("role", "owner"),
        ],
    );
    assert_eq!(blue_join.status(), 404);
    let self_promote = post(
        &bob,
        "/ui/teams/red",
        "/ui/teams/red/members",
        &[("action", "set"), ("user_id", &bob_id), ("role", "owner")],
    );
    assert_eq!(self_promote.status(), 403);
    let teams = bob.html("/ui/teams", 200);
    assert!(teams.contains("/ui/teams/red") && !teams.contains("/ui/teams/blue"));
    let links = bob.html("/ui/links", 200);
    assert!(
        links.contains("redplan1") && !links.contains("bluesecret"),
        "{links}"
    );
    let search = bob.html("/ui/links?q=secret", 200);
    assert!(!search.contains("bluesecret"));
    let status = bob.get("/ui/links/bluesecret").status().as_u16();
    assert!(status == 403 || status == 404, "{status}");
    let dashboard = bob.html("/ui/dashboard", 200);
    assert!(!dashboard.contains("bluesecret") && !dashboard.contains("blue.example.com"));
    assert_eq!(bob.get("/ui/admin/audit").status(), 403);

    // The audit page: the admin sees what happened, filtered and paged.
    // (Entries are badges; the same words are in the filter's menu too.)
    let entry = |words: &str| format!("<span class=\"badge\">{words}</span>");
    let audit = admin.html("/ui/admin/audit", 200);
    assert!(
        audit.contains(&entry("user added")) && audit.contains(&entry("member set")),
        "{audit}"
    );
    let filtered = admin.html("/ui/admin/audit?action=team.created", 200);
    assert!(filtered.contains(&entry("team made")) && !filtered.contains(&entry("user added")));
    let by_team = admin.html("/ui/admin/audit?team=red", 200);
    assert!(by_team.contains(&entry("member set")) && !by_team.contains(&entry("user added")));
    assert_eq!(admin.get("/ui/admin/audit?from=yesterday").status(), 400);
    // In Chinese too.
    let zh = admin
        .client
        .get(app.url("/ui/admin/audit"))
        .header("accept-language", "zh-CN")
        .send()
        .expect("GET");
    assert!(zh.text().expect("body").contains("审计日志"));

    // Deleting a user: behind its confirmation, then gone.
    let deleted = post(
        &admin,
        "/ui/admin/users",
        &format!("/ui/admin/users/{bob_id}"),
        &[("action", "delete")],
    );
    assert_eq!(deleted.status(), 303);
    assert!(!signed_in(&bob));
    assert!(!admin
        .html("/ui/admin/users", 200)
        .contains("bob@example.com"));

    // No token: refused.
    let token_less = admin.post_raw("/ui/teams", &[("slug", "green")]);
    assert_eq!(token_less.status(), 403);
    let _ = csrf_of(&admin.html("/ui/teams", 200));
    assert!(!admin.html("/ui/teams", 200).contains("/ui/teams/green"));
}
