//! `GET /api/v1/openapi.json` on the real server: a valid OpenAPI 3 document that lists every
//! route of the router with its methods. The routes are read from `router()`'s source, so a
//! route added without a `#[utoipa::path]` fails here.

mod common;

use common::TestApp;
use serde_json::Value;

/// `(path, methods)` of every `.route(...)` in `crates/web/src/http/mod.rs`; the `api`
/// router's paths get its `/api/v1` prefix.
fn router_routes() -> Vec<(String, Vec<String>)> {
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/web/src/http/mod.rs"
    ))
    .expect("read crates/web/src/http/mod.rs");
    let body = source
        .split("pub fn router(")
        .nth(1)
        .expect("router() in crates/web/src/http/mod.rs");
    let nested = body.split(".nest(\"/api/v1\"").next().unwrap_or(body);
    let api_part = nested.split("let body_limit").next().unwrap_or(nested);
    let mut routes = Vec::new();
    for (part, prefix) in [
        (api_part, "/api/v1"),
        (body.split(".nest(\"/api/v1\"").nth(1).unwrap_or(""), ""),
    ] {
        for chunk in part.split(".route(").skip(1) {
            let Some(path) = chunk.split('"').nth(1) else {
                continue;
            };
            // The handler expression runs to the route call's closing parenthesis.
            let mut depth = 1i32;
            let mut end = chunk.len();
            for (i, c) in chunk.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = i;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let handler = &chunk[..end];
            let methods: Vec<String> = ["get", "post", "put", "patch", "delete"]
                .iter()
                .filter(|m| {
                    handler.contains(&format!("{m}("))
                        && (handler.contains(&format!(" {m}("))
                            || handler.contains(&format!(".{m}("))
                            || handler.contains(&format!("\n{m}("))
                            || handler.contains(&format!("({m}(")))
                })
                .map(|m| m.to_string())
                .collect();
            routes.push((format!("{prefix}{path}"), methods));
        }
    }
    routes
}

#[test]
fn every_route_is_in_the_openapi_document() {
    let routes = router_routes();
    assert!(routes.len() >= 10, "parsed the router: {routes:?}");
    let has = |path: &str, methods: &[&str]| {
        routes
            .iter()
            .any(|(p, m)| p == path && methods.iter().all(|x| m.iter().any(|y| y == x)))
    };
    assert!(has("/api/v1/links", &["get", "post"]), "{routes:?}");
    assert!(
        has("/api/v1/links/{code}", &["get", "patch", "delete"]),
        "{routes:?}"
    );
    assert!(has("/yourls-api.php", &["get", "post"]), "{routes:?}");
    assert!(has("/{code}", &["get"]), "{routes:?}");
    assert!(has("/healthz", &["get"]), "{routes:?}");
    // The redirect fast path takes every other one-segment GET for a code.
    for (path, _) in &routes {
        let one_segment = path.len() > 1 && !path[1..].contains('/');
        if one_segment && path != "/{code}" {
            assert!(
                vshortlink::http::OWN_ROUTES.contains(&path.as_str()),
                "{path} is a route of its own: add it to http::OWN_ROUTES"
            );
        }
    }
    let app = TestApp::start();
    let response = app.get("/api/v1/openapi.json");
    assert_eq!(response.status().as_u16(), 200, "no key needed");
    let doc: Value = response.json().expect("json");
    assert!(
        doc["openapi"].as_str().unwrap_or("").starts_with("3."),
        "{doc}"
    );
    assert_eq!(doc["info"]["title"], "vshortlink");
    let paths = doc["paths"].as_object().expect("paths");
    let mut missing = Vec::new();
    for (path, methods) in &routes {
        match paths.get(path) {
            None => missing.push(format!("{path} (all methods)")),
            Some(item) => {
                for m in methods {
                    if item.get(m).is_none() {
                        missing.push(format!("{} {path}", m.to_uppercase()));
                    }
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "routes of the router missing from /api/v1/openapi.json (add #[utoipa::path] and list the handler in crates/web/src/http/openapi.rs): {missing:?}"
    );
    // Body types come from the code.
    let create = &doc["components"]["schemas"]["CreateLink"];
    assert!(create["properties"]["url"].is_object(), "{create}");
    assert!(doc["paths"]["/yourls-api.php"]["post"].is_object());
}
