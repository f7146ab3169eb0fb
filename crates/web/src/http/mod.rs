//! The HTTP surface: [`router`] (used by the server and by tests alike), errors as
//! problem+json, the API-key extractor, and thin handlers that call the domain services.
//!
//! - `api` — `/api/v1` (links, batch, pools, health)
//! - `accounts` — `/api/v1` for people: `/me`, users, teams and members, keys, the audit log
//! - `asked` — one request to `/{code}` and the answers the redirect and the gates share
//! - `redirect` — `/{code}`, the `/{code}+` preview, `/robots.txt`, and the 404/410/429/403
//!   pages; `gates` — the pages before the destination (password, form, in-app, crawler
//!   preview) on the same path
//! - `leads` — a link's leads (`/api/v1/links/{code}/leads`); `reviews` — the review of
//!   destinations (`/api/v1/reviews`, a link's reviews and overrides)
//! - `domains` — `/api/v1/domains`, the configured domains (admins)
//! - `backup` — `/api/v1/backup`, a backup of the running server, streamed
//! - `stats` — visits, statistics and `/metrics`
//! - `observe` — request metrics
//! - `qr` — QR codes of short URLs
//! - `yourls` — `/yourls-api.php`, the YOURLS-compatible API
//! - `shlink` — `/rest/v3`, the Shlink-compatible REST API (and `/rest/health`)
//! - `openapi` — `/api/v1/openapi.json`, generated from the handlers
//! - `server` — the accept loop: header timeout and size, connection cap, drain
//! - `front` — the first stop of a request: `GET /{code}` without the router, the rest to it
//!
//! What the API and the pages share is [`crate::web`] below both: the errors mapped to
//! statuses (`web::error`, the only place), the caller and its key (`web::caller`).
//!
//! The web pages (`/`, `/ui/*`, `/static/*`) are [`crate::ui`]'s router, merged here.

pub mod accounts;
pub mod api;
pub mod asked;
pub mod backup;
pub mod domains;
pub mod front;
pub mod gates;
pub mod leads;
pub mod observe;
pub mod openapi;
pub mod qr;
pub mod redirect;
pub mod reviews;
pub mod server;
pub mod shlink;
pub mod stats;
pub mod yourls;

use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{delete, get, post, put};
use axum::Router;
use tower_http::timeout::TimeoutLayer;

use crate::web::state::AppState;

/// Longest a request may take before it is answered 408; also bounds graceful shutdown.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The one-segment paths that are routes of their own in [`router`]. Every other
/// `/{segment}` is a code, which [`front`] answers before the router; `tests/openapi.rs`
/// fails when a one-segment route is missing here.
pub const OWN_ROUTES: [&str; 4] = ["/healthz", "/metrics", "/yourls-api.php", "/robots.txt"];

/// Every route of the server: the API, the redirect path, YOURLS, and `pages` (the web
/// interface's routes, which the caller passes in so that this module names no page module).
pub fn router(state: AppState, pages: Router<AppState>) -> Router {
    let api = Router::new()
        .route("/links", post(api::create_link).get(api::list_links))
        .route("/links/batch", post(api::create_batch))
        .route(
            "/links/{code}",
            get(api::get_link)
                .patch(api::update_link)
                .delete(api::delete_link),
        )
        .route("/links/{code}/stats", get(stats::link_stats))
        .route("/links/{code}/visits", get(stats::link_visits))
        .route("/links/{code}/leads", get(leads::link_leads))
        .route("/links/{code}/reviews", get(reviews::link_reviews))
        .route("/links/{code}/review", post(reviews::review_link))
        .route("/reviews", get(reviews::by_verdict))
        .route("/links/{code}/qr", get(qr::link_qr))
        .route("/stats", get(stats::system_stats))
        .route("/pools", get(api::list_pools))
        .route("/pools/{length}/refill", post(api::refill_pool))
        .route("/maintenance", get(api::maintenance_status))
        .route("/maintenance/run", post(api::run_maintenance))
        .route("/me", get(accounts::me))
        .route("/me/password", post(accounts::change_password))
        .route(
            "/users",
            post(accounts::create_user).get(accounts::list_users),
        )
        .route(
            "/users/{id}",
            get(accounts::get_user)
                .patch(accounts::update_user)
                .delete(accounts::delete_user),
        )
        .route(
            "/teams",
            post(accounts::create_team).get(accounts::list_teams),
        )
        .route(
            "/teams/{slug}",
            get(accounts::get_team)
                .patch(accounts::update_team)
                .delete(accounts::delete_team),
        )
        .route(
            "/teams/{slug}/members/{user_id}",
            put(accounts::set_member).delete(accounts::remove_member),
        )
        .route("/keys", post(accounts::create_key).get(accounts::list_keys))
        .route("/keys/{id}", delete(accounts::revoke_key))
        .route("/audit", get(accounts::audit))
        .route(
            "/domains",
            post(domains::create_domain).get(domains::list_domains),
        )
        .route(
            "/domains/{host}",
            get(domains::get_domain)
                .patch(domains::update_domain)
                .delete(domains::delete_domain),
        )
        .route("/backup", get(backup::backup))
        .route("/openapi.json", get(openapi::spec))
        .fallback(api::not_found)
        .method_not_allowed_fallback(api::method_not_allowed);
    let body_limit = state.config.limits.max_body_bytes;
    Router::new()
        .nest("/api/v1", api)
        .route("/healthz", get(api::healthz))
        .route("/metrics", get(stats::metrics))
        .merge(pages)
        .route("/yourls-api.php", get(yourls::api).post(yourls::api))
        .merge(shlink::router())
        .route("/robots.txt", get(redirect::robots))
        .route("/{code}", get(redirect::redirect).post(redirect::post))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            observe::observe,
        ))
        .fallback(redirect::fallback)
        .method_not_allowed_fallback(api::method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
        .with_state(state)
}
