//! `GET /api/v1/links/{code}/leads`: the leads a link's form collected, newest first, as JSON
//! pages or one streamed CSV (formula cells neutralised). Editors and admins of the link's
//! space read them; viewers do not (leads are personal data, not statistics).

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

use super::api::{page_params, CodePath};
use crate::config::Role;
use crate::links::rfc3339;
use crate::model::Lead;
use crate::web::access::{authorized_link, blocking};
use crate::web::caller::Caller;
use crate::web::csv::leads_csv_response;
use crate::web::error::ApiError;
use crate::web::state::AppState;

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
    params(("code" = String, Path, description = "The link's code"), ("domain" = Option<String>, Query, description = "The host of the link's domain (SPEC §26); absent: the default domain; an unconfigured one: 404"),
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
        Some("csv") => {
            state.plans.require_in(&link.space, "export", "format")?;
            return leads_csv_response(state.leads.clone(), link).await;
        }
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
