//! `/yourls-api.php`: the YOURLS 1.10 API, so that existing YOURLS clients (browser
//! extensions, ShareX, the PyPI `yourls` client, scripts) work unchanged.
//!
//! Owns the YOURLS request and answer shapes only: parameters from the query string and a
//! form body (POST wins, like PHP's `$_REQUEST`), the three ways to sign in, the actions
//! (`shorturl`, `expand`, `url-stats`, `stats`, `db-stats`, `version`) and the four output
//! formats (`xml` by default, `json`, `jsonp`, `simple`). The HTTP status is the body's
//! `statusCode`, else its `errorCode`, else 200, as in YOURLS's `yourls_api_output`.
//!
//! Link work goes through the domain service; YOURLS bodies are built here from domain errors
//! (they are not problem+json, so `error.rs` does not render them).
//!
//! | file         | owns                                                                        |
//! |--------------|-----------------------------------------------------------------------------|
//! | `mod.rs`     | the handler: parameters, sign-in and its rate limit, the action, the output |
//! | `params.rs`  | the parameters: query string, urlencoded or multipart body; PHP readings    |
//! | `auth.rs`    | the three ways to sign in                                                   |
//! | `actions.rs` | the actions and the answers they give, failures included                    |
//! | `output.rs`  | the answer's members and the four output formats                            |

mod actions;
mod auth;
mod output;
mod params;

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::response::Response;

pub use self::actions::YOURLS_VERSION;
pub use self::params::Params;

use self::actions::{dispatch, failure_answer};
use self::auth::{authenticate, AuthFailure};
use self::output::{output, Answer, Obj};
use crate::web::state::AppState;

/// `GET` and `POST /yourls-api.php`.
#[utoipa::path(method(get, post), path = "/yourls-api.php", tag = "yourls",
    responses((status = 200, description = "YOURLS 1.10 answer in `format` (xml by default, json, jsonp, simple)"),
        (status = 400, description = "YOURLS `fail` body or unknown action"), (status = 403, description = "Please log in"),
        (status = 404, description = "Short URL not found")))]
pub async fn api(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    method: Method,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = if method == Method::POST {
        body
    } else {
        Bytes::new()
    };
    let params = Params::read(query.as_deref(), &headers, body).await;
    let format = params.get("format").unwrap_or("xml").to_string();
    let callback = params
        .get("callback")
        .or_else(|| params.get("jsonp"))
        .map(str::to_string);

    let ip = state.client_ip(peer.ip(), &headers);
    // `limits.rates.auth_per_ip`: signatures and passwords count with the API's keys.
    let presented = ["signature", "username", "password"]
        .iter()
        .any(|name| params.filled(name).is_some());
    let limited = if presented {
        state.limits.check_auth(ip).err()
    } else {
        None
    };
    let found = match limited {
        Some(e) => Err(AuthFailure::Limited(e)),
        None => authenticate(&state, &params, ip, presented).await,
    };
    let answer = match found {
        Err(AuthFailure::Limited(e)) => {
            let message = format!(
                "Too many failed logins from this address; try again in {} s",
                e.retry_after_secs
            );
            let body = Obj::default()
                .s("message", message.as_str())
                .s("errorCode", "429")
                .s("callback", params.get("callback").unwrap_or(""));
            let mut response = output(
                &format,
                Answer::new(body, message.as_str()),
                params.get("callback").map(str::to_string),
                true,
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(e.retry_after_secs));
            return response;
        }
        Err(AuthFailure::Denied(message)) => {
            // YOURLS's auth.php: the callback member is always there, empty when not given.
            let body = Obj::default()
                .s("message", message)
                .s("errorCode", "403")
                .s("callback", params.get("callback").unwrap_or(""));
            return output(
                &format,
                Answer::new(body, message),
                params.get("callback").map(str::to_string),
                true,
            );
        }
        Ok(principal) => {
            let ip = ip.to_string();
            let state2 = state.clone();
            let params = Params(params.0.clone());
            let work =
                tokio::task::spawn_blocking(move || dispatch(&state2, &principal, &params, &ip));
            match work.await {
                Ok(answer) => answer,
                Err(e) => failure_answer(&e.to_string()),
            }
        }
    };
    output(&format, answer, callback, false)
}
