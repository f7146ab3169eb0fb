//! `GET /api/v1/backup`: a backup of the running server, streamed (admins of every space only:
//! it holds every link). The bytes come from the backup service's bounded stream, written on a
//! blocking thread as fast as the client reads; this handler checks the caller, reads the
//! options and the compression asked for, and shapes the response's headers.

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use tokio_stream::wrappers::ReceiverStream;

use crate::backup::BackupOptions;
use crate::config::Role;
use crate::web::caller::Caller;
use crate::web::error::ApiError;
use crate::web::state::AppState;

/// How the bytes travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Packing {
    /// JSON lines as they are.
    Plain,
    /// JSON lines with `Content-Encoding: zstd` (the client asked in `Accept-Encoding`).
    Encoded,
    /// A zstd file (`?compress=zstd`).
    File,
}

#[utoipa::path(get, path = "/api/v1/backup", tag = "operations", security(("api_key" = [])),
    params(
        ("visits" = Option<bool>, Query, description = "Also every visit, after the links"),
        ("leads" = Option<bool>, Query, description = "Also every lead (personal data), after the visits"),
        ("accounts" = Option<bool>, Query, description = "Also every account (none are stored yet: accepted, adds nothing)"),
        ("compress" = Option<String>, Query, description = "`zstd`: the answer is a zstd file (`application/zstd`)"),
        ("Accept-Encoding" = Option<String>, Header, description = "Naming `zstd`: JSON lines with `Content-Encoding: zstd`")),
    responses(
        (status = 200, description = "The export format as JSON lines (`application/x-ndjson`), streamed, ending with `{\"type\":\"end\",\"records\":N,\"sha256\":\"…\"}`: N lines before it, the SHA-256 of their bytes (newlines included, before compression)"),
        (status = 400, description = "A bad option (`invalid_option`, naming it)"),
        (status = 401, description = "No API key"),
        (status = 403, description = "Not an admin of every space")))]
pub async fn backup(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let principal = caller.require(Role::Admin)?;
    if principal.spaces.is_some() {
        return Err(ApiError::forbidden(format!(
            "the key `{}` is limited to some spaces; a backup holds every space",
            principal.name
        )));
    }
    let flag = |name: &str| -> Result<bool, ApiError> {
        match params.get(name).map(String::as_str) {
            None | Some("false") | Some("0") => Ok(false),
            Some("true") | Some("1") | Some("") => Ok(true),
            Some(other) => Err(ApiError::bad_request(
                "invalid_option",
                name,
                format!("`{other}` is not true or false"),
            )),
        }
    };
    let options = BackupOptions {
        visits: flag("visits")?,
        leads: flag("leads")?,
        accounts: flag("accounts")?,
    };
    let packing = match params.get("compress").map(String::as_str) {
        Some("zstd") => Packing::File,
        None | Some("") | Some("none") if accepts_zstd(&headers) => Packing::Encoded,
        None | Some("") | Some("none") => Packing::Plain,
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_option",
                "compress",
                format!("`{other}` is not a compression: zstd, or none"),
            ))
        }
    };
    let chunks = state.backups.stream(options, packing != Packing::Plain);
    let stamp = time::OffsetDateTime::now_utc();
    let name = format!(
        "vshortlink-{:04}{:02}{:02}T{:02}{:02}{:02}Z.jsonl{}",
        stamp.year(),
        u8::from(stamp.month()),
        stamp.day(),
        stamp.hour(),
        stamp.minute(),
        stamp.second(),
        if packing == Packing::File { ".zst" } else { "" }
    );
    let mut response = Body::from_stream(ReceiverStream::new(chunks)).into_response();
    let headers = response.headers_mut();
    let content_type = match packing {
        Packing::File => "application/zstd",
        Packing::Plain | Packing::Encoded => "application/x-ndjson",
    };
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if packing == Packing::Encoded {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("zstd"));
    }
    headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

/// Whether `Accept-Encoding` names zstd with a weight above zero.
fn accepts_zstd(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';').map(str::trim);
            let coding = parts.next().unwrap_or_default();
            let weight = parts
                .find_map(|p| p.strip_prefix("q="))
                .and_then(|q| q.parse::<f32>().ok())
                .unwrap_or(1.0);
            coding.eq_ignore_ascii_case("zstd") && weight > 0.0
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zstd_is_accepted_only_when_named_with_weight() {
        let with = |value: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(value));
            accepts_zstd(&h)
        };
        assert!(with("gzip, zstd"));
        assert!(with("zstd;q=0.5"));
        assert!(!with("zstd;q=0"));
        assert!(!with("gzip, br"));
        assert!(!accepts_zstd(&HeaderMap::new()));
    }
}
