//! `GET`/`HEAD /{code}` (SPEC §6): resolve through the domain service and answer a redirect,
//! or the 404/410 page (problem+json for clients that ask for JSON), and hand the visit to the
//! visit queue. Never waits on background work.

use axum::extract::rejection::PathRejection;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::observe::count_unmatched;
use crate::links::Resolution;
use crate::state::AppState;
use crate::visits::client;

/// Browsers come back for every visit, so every visit can be counted.
const CACHE_CONTROL: HeaderValue = HeaderValue::from_static("private, max-age=0");

#[utoipa::path(get, path = "/{code}", tag = "redirect",
    params(("code" = String, Path, description = "A short code")),
    responses((status = 302, description = "To the long URL (status per `server.redirect_status`)"),
        (status = 404, description = "No such code"), (status = 410, description = "Expired or deleted")))]
pub async fn redirect(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Response {
    // A path that does not even decode (bad percent-encoding) is no code.
    let Ok(Path(code)) = path else {
        return missing(&state, StatusCode::NOT_FOUND, "", &headers);
    };
    match state.links.resolve(&code) {
        Ok(Resolution::Found { id, url }) => {
            let Ok(location) = HeaderValue::from_str(&url) else {
                return ApiError::internal(format!("stored URL of `{code}` is not a header value"))
                    .into_response();
            };
            let status = StatusCode::from_u16(state.config.server.redirect_status)
                .unwrap_or(StatusCode::FOUND);
            let mut response = status.into_response();
            let h = response.headers_mut();
            h.insert(header::LOCATION, location);
            h.insert(header::CACHE_CONTROL, CACHE_CONTROL);
            if state.recorder.enabled() {
                let trust = state.config.server.trust_proxy_headers;
                state.recorder.record(
                    id,
                    code,
                    client::client_ip(peer.ip(), &headers, trust),
                    headers.get(header::USER_AGENT),
                    headers.get(header::REFERER),
                );
            }
            response
        }
        Ok(Resolution::Gone) => missing(&state, StatusCode::GONE, &code, &headers),
        Ok(Resolution::NotFound) => missing(&state, StatusCode::NOT_FOUND, &code, &headers),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// Any path that is no route and no code.
pub async fn fallback(
    State(state): State<AppState>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    count_unmatched(&state, &method, StatusCode::NOT_FOUND);
    missing(&state, StatusCode::NOT_FOUND, "", &headers)
}

fn missing(state: &AppState, status: StatusCode, code: &str, headers: &HeaderMap) -> Response {
    let mut response = if wants_json(headers) {
        let (kind, detail) = if status == StatusCode::GONE {
            (
                "gone",
                format!("the link `{code}` has expired or was deleted"),
            )
        } else {
            ("not_found", format!("no link has the code `{code}`"))
        };
        ApiError::new(status, kind, detail).into_response()
    } else {
        state.pages.error(status)
    };
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, CACHE_CONTROL);
    response
}

fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/json") || v.contains("application/problem+json"))
}
