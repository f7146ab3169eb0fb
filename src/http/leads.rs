//! `GET /api/v1/links/{code}/leads`: the leads a link's form collected, newest first, as JSON
//! pages or one streamed CSV (formula cells neutralised). Editors and admins of the link's
//! space read them; viewers do not (leads are personal data, not statistics).

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::api::{authorized_link, blocking, page_params, CodePath};
use super::auth::Caller;
use super::error::ApiError;
use crate::config::Role;
use crate::csv_safe::CsvWriter;
use crate::leads::{Leads, CSV_PAGE};
use crate::links::rfc3339;
use crate::model::{Lead, Link};
use crate::state::AppState;

/// CSV chunks buffered ahead of a slow client.
const CSV_AHEAD: usize = 4;

/// A lead as the API shows it.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct LeadView {
    pub id: u64,
    pub at: String,
    /// Field name → value, in the form's order.
    #[schema(value_type = Object)]
    pub values: serde_json::Map<String, serde_json::Value>,
    /// The consent text the visitor ticked; `null` when the form had none.
    pub consent: Option<String>,
}

impl From<Lead> for LeadView {
    fn from(lead: Lead) -> Self {
        Self {
            id: lead.id,
            at: rfc3339(lead.at),
            values: lead
                .values
                .into_iter()
                .map(|(k, v)| (k, serde_json::Value::String(v)))
                .collect(),
            consent: lead.consent,
        }
    }
}

/// A page of leads.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct LeadPageView {
    pub items: Vec<LeadView>,
    /// Pass as `cursor` for the next (older) page; `null` at the end.
    pub next_cursor: Option<String>,
}

/// `GET /api/v1/links/{code}/leads?cursor&limit`, or `?format=csv` for all of them.
#[utoipa::path(get, path = "/api/v1/links/{code}/leads", tag = "links",
    params(("code" = String, Path, description = "The link's code"),
        ("cursor" = Option<String>, Query, description = "From a previous page's `next_cursor`"),
        ("limit" = Option<usize>, Query, description = "1 to 1000 (default 100)"),
        ("format" = Option<String>, Query, description = "`json` (default) or `csv`")),
    security(("api_key" = [])),
    responses((status = 200, description = "`{items: [{id, at, values, consent}], next_cursor}`, newest first; or CSV (`id,at,<fields…>,consent`) with `format=csv`", body = LeadPageView),
        (status = 403, description = "A viewer key, or a key of another space"),
        (status = 404, description = "No such code")))]
pub async fn link_leads(
    State(state): State<AppState>,
    caller: Caller,
    CodePath(code): CodePath,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let link = authorized_link(&state, &caller, &code, Role::Editor)?;
    let (before, limit) = page_params(&params)?;
    match params.get("format").map(String::as_str) {
        None | Some("") | Some("json") => {}
        Some("csv") => return csv_response(state.leads.clone(), link).await,
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_query",
                "format",
                format!("`{other}` is not one of json, csv"),
            ))
        }
    }
    let leads = state.leads.clone();
    let page = blocking(move || leads.page(link.id, before, limit)).await?;
    Ok(Json(LeadPageView {
        items: page.leads.into_iter().map(LeadView::from).collect(),
        next_cursor: page.next.map(|n| n.to_string()),
    })
    .into_response())
}

/// Every lead of a link as a CSV download, newest first: `id`, `at`, one column per field
/// name, `consent`. Streamed a store page at a time.
pub async fn csv_response(leads: Arc<Leads>, link: Link) -> Result<Response, ApiError> {
    let code = link.code.clone();
    let names = {
        let (leads, link) = (leads.clone(), link.clone());
        blocking(move || leads.names(&link)).await?
    };
    let mut response = Response::new(csv_body(leads, link.id, names));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"leads-{code}.csv\""))
    {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

fn csv_body(leads: Arc<Leads>, link_id: u64, names: Vec<String>) -> Body {
    let (sender, receiver) = mpsc::channel::<Result<Bytes, std::io::Error>>(CSV_AHEAD);
    tokio::spawn(async move {
        let mut before = None;
        let mut first = true;
        loop {
            let service = leads.clone();
            let page =
                tokio::task::spawn_blocking(move || service.page(link_id, before, CSV_PAGE)).await;
            let page = match page {
                Ok(Ok(page)) => page,
                Ok(Err(e)) => return fail(&sender, e.to_string()).await,
                Err(e) => return fail(&sender, e.to_string()).await,
            };
            let mut writer = CsvWriter::new(Vec::with_capacity(128 * CSV_PAGE));
            let mut row = |cells: Vec<String>| writer.record(cells);
            if first {
                let header = ["id", "at"]
                    .iter()
                    .map(|s| s.to_string())
                    .chain(names.iter().cloned())
                    .chain(std::iter::once("consent".to_string()))
                    .collect();
                if let Err(e) = row(header) {
                    return fail(&sender, e.to_string()).await;
                }
                first = false;
            }
            for lead in page.leads {
                let cells = [lead.id.to_string(), rfc3339(lead.at)]
                    .into_iter()
                    .chain(names.iter().map(|name| {
                        lead.values
                            .iter()
                            .find(|(n, _)| n == name)
                            .map(|(_, v)| v.clone())
                            .unwrap_or_default()
                    }))
                    .chain(std::iter::once(lead.consent.unwrap_or_default()))
                    .collect();
                if let Err(e) = row(cells) {
                    return fail(&sender, e.to_string()).await;
                }
            }
            match writer.into_inner() {
                Ok(bytes) => {
                    if sender.send(Ok(Bytes::from(bytes))).await.is_err() {
                        return;
                    }
                }
                Err(e) => return fail(&sender, e.to_string()).await,
            }
            match page.next {
                Some(next) => before = Some(next),
                None => break,
            }
        }
    });
    Body::from_stream(ReceiverStream::new(receiver))
}

/// Ends a stream with an error: the client sees a failed transfer, not a short file.
async fn fail(sender: &mpsc::Sender<Result<Bytes, std::io::Error>>, detail: String) {
    tracing::error!(error = %detail, "lead export failed");
    let _ = sender.send(Err(std::io::Error::other(detail))).await;
}
