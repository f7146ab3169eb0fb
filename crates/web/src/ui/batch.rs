//! Results of "many at once" shortenings, kept for an hour so that their CSV can be downloaded
//! (`/ui/batch/{id}`) without creating anything again. The id is random and unguessable, and a
//! result is only given to the browser that made it: it is kept with a digest of that
//! browser's form token (its session's, or the `vsl_csrf` cookie's for visitors who are not
//! signed in), so a leaked link to the CSV reads nothing. Results are kept in the
//! [`RecordCache`]: in memory on one instance (bounded), in the shared store when instances
//! share one, so that the download may reach another instance than the shortening did.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::render::{message, Visitor};
use super::session::{random_token, same_token};
use super::PageState;
use crate::clock::Clock;
use crate::csv_safe::CsvWriter;
use crate::model::Millis;
use crate::records::{RecordCache, RecordKind};

/// How long a result stays downloadable.
const KEEP_MS: Millis = 3_600_000;
/// Most results kept; past it the oldest goes.
const MAX_KEPT: usize = 256;

/// One line of a batch: what was asked and what came of it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct BatchLine {
    pub line: usize,
    pub url: String,
    pub code: Option<String>,
    pub short_url: Option<String>,
    /// `false` when the URL already had a link (dedup).
    pub created: bool,
    /// Catalogue key of the failure.
    pub error: Option<String>,
    /// The failure in English, for the CSV (read by programs and spreadsheets alike).
    pub detail: Option<String>,
}

/// A result with the digest of its browser's form token.
#[derive(serde::Serialize, serde::Deserialize)]
struct Owned {
    owner: String,
    lines: Vec<BatchLine>,
}

/// The digest a result is kept with: the token itself is a secret of the browser's.
fn owner_digest(token: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The kind of record a batch result is, and how many one instance keeps in memory.
const KIND: RecordKind = RecordKind {
    name: "batch",
    capacity: MAX_KEPT,
};

pub struct RecentBatches {
    clock: Arc<dyn Clock>,
    records: Arc<RecordCache>,
}

impl RecentBatches {
    pub fn new(clock: Arc<dyn Clock>, records: Arc<RecordCache>) -> Self {
        Self { clock, records }
    }

    /// Keeps a result for the browser whose form token is `owner`; returns its id. A shared
    /// store that fails to keep it costs only the download (logged); the links were made.
    pub fn keep(&self, lines: Vec<BatchLine>, owner: &str) -> String {
        let id = random_token();
        let kept = Owned {
            owner: owner_digest(owner),
            lines,
        };
        let bytes = serde_json::to_vec(&kept).unwrap_or_default();
        let now = self.clock.now();
        if let Err(e) = self.records.put(KIND, id.as_bytes(), &bytes, now, KEEP_MS) {
            tracing::warn!(error = %e, "batch result could not be kept for download");
        }
        id
    }

    /// The lines of a result, when `owner` is the form token it was kept for.
    pub fn get(&self, id: &str, owner: &str) -> Option<Vec<BatchLine>> {
        let now = self.clock.now();
        let bytes = self
            .records
            .get(KIND, id.as_bytes(), now, KEEP_MS, false)
            .map_err(|e| tracing::warn!(error = %e, "batch result lookup failed"))
            .ok()??;
        let kept: Owned = serde_json::from_slice(&bytes).ok()?;
        same_token(&kept.owner, &owner_digest(owner)).then_some(kept.lines)
    }
}

/// The CSV of a batch result (refused lines echo what was sent: its cells are neutralised
/// like every CSV's).
pub fn to_csv(lines: &[BatchLine]) -> Result<Vec<u8>, csv::Error> {
    let mut writer = CsvWriter::new(Vec::new());
    writer.record(["line", "url", "short_url", "code", "created", "error"])?;
    for l in lines {
        writer.record([
            l.line.to_string().as_str(),
            &l.url,
            l.short_url.as_deref().unwrap_or(""),
            l.code.as_deref().unwrap_or(""),
            if l.error.is_some() {
                ""
            } else if l.created {
                "true"
            } else {
                "false"
            },
            l.detail.as_deref().unwrap_or(""),
        ])?;
    }
    writer.into_inner()
}

/// `GET /ui/batch/{id}`: the CSV of a recent batch.
pub async fn download(
    State(state): State<PageState>,
    visitor: Visitor,
    Path(id): Path<String>,
) -> Response {
    let id = id.trim_end_matches(".csv");
    let Some(lines) = state.ui.batches.get(id, &visitor.csrf) else {
        return message(&state, &visitor, StatusCode::NOT_FOUND, "msg.batch_gone");
    };
    match to_csv(&lines) {
        Ok(bytes) => {
            let mut response = bytes.into_response();
            let h = response.headers_mut();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/csv; charset=utf-8"),
            );
            h.insert(
                header::CONTENT_DISPOSITION,
                HeaderValue::from_static("attachment; filename=\"short-links.csv\""),
            );
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(e) => crate::web::error::ApiError::internal(e).into_response(),
    }
}
