//! The pages' static files (stylesheet, script, icon), compiled into the binary and served from
//! an allow-list under `/static/`. Pages link them with `?v=<content hash>`, so a browser keeps
//! each one for a year and fetches it again only when the binary ships a new one; the hash is
//! also the ETag.

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// Every file `/static/` serves: name, content type, bytes. Nothing else is reachable.
const FILES: &[(&str, &str, &[u8])] = &[
    (
        "app.css",
        "text/css; charset=utf-8",
        include_bytes!("../../../../assets/static/app.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../../../assets/static/app.js"),
    ),
    (
        "visitor.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../../../assets/static/visitor.js"),
    ),
    (
        "icon.svg",
        "image/svg+xml",
        include_bytes!("../../../../assets/static/icon.svg"),
    ),
];

/// One embedded file with its hash.
pub struct Asset {
    pub name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
    /// First 16 hex digits of the SHA-256 of the bytes.
    pub hash: String,
}

/// The embedded files, hashed once at start-up.
pub struct Assets {
    files: Vec<Asset>,
}

impl Assets {
    pub fn new() -> Self {
        let files = FILES
            .iter()
            .map(|(name, content_type, bytes)| Asset {
                name,
                content_type,
                bytes,
                hash: hex::encode(&Sha256::digest(bytes)[..8]),
            })
            .collect();
        Self { files }
    }

    /// `name?v=hash` for a template, so that a changed file gets a new URL.
    pub fn versioned(&self, name: &str) -> String {
        let hash = self
            .files
            .iter()
            .find(|a| a.name == name)
            .map_or("", |a| a.hash.as_str());
        format!("/static/{name}?v={hash}")
    }

    /// Bytes of all files, for the page-weight figures.
    pub fn total_bytes(&self) -> usize {
        self.files.iter().map(|a| a.bytes.len()).sum()
    }

    /// Answers `GET /static/{name}`.
    pub fn serve(&self, name: &str, headers: &HeaderMap) -> Response {
        let Some(asset) = self.files.iter().find(|a| a.name == name) else {
            return StatusCode::NOT_FOUND.into_response();
        };
        let etag = format!("\"{}\"", asset.hash);
        let cache = HeaderValue::from_static("public, max-age=31536000, immutable");
        let matches = headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
        let mut response = if matches {
            StatusCode::NOT_MODIFIED.into_response()
        } else {
            let mut r = asset.bytes.into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            );
            r
        };
        let h = response.headers_mut();
        h.insert(header::CACHE_CONTROL, cache);
        if let Ok(v) = HeaderValue::from_str(&etag) {
            h.insert(header::ETAG, v);
        }
        h.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        response
    }
}

impl Default for Assets {
    fn default() -> Self {
        Self::new()
    }
}

/// `GET /static/{name}`.
pub async fn serve(
    axum::extract::State(state): axum::extract::State<super::PageState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    state.ui.assets.serve(&name, &headers)
}
