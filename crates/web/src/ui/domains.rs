//! `/ui/domains` (admins of the whole instance, SPEC §26): every domain, a form to add one
//! (host, team, the three redirects, the two well-known files), and per domain: change its
//! team and redirects and its well-known files, or delete it (behind a confirmation; never the
//! default domain). A refused add or change is shown next to its field, with what was typed.
//! The rules are the domains service's.

use std::collections::{BTreeMap, HashMap};

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::{context, Value};

use super::account::{admin, Refusal};
use super::forms::{field, CheckedForm};
use super::render::{message, page, see_other, Visitor};
use super::PageState;
use crate::domains::{DomainPatch, NewDomain};
use crate::web::access::blocking;
use crate::web::domains::DomainView;
use crate::web::error::ApiError;

/// The fields of the add form, as posted: the host, then what a domain's edit form has too.
const ADD_FIELDS: [&str; 7] = [
    "host",
    "team",
    "root_url",
    "not_found_url",
    "other_url",
    "apple_app_site_association",
    "assetlinks",
];

/// The fields of a domain's edit form, as posted: the add form's but the host.
const EDIT_FIELDS: &[&str] = ADD_FIELDS.split_at(1).1;

/// What the page shows besides the domains.
#[derive(Default)]
struct Shown {
    /// The add form's errors by field; a row's: `row.<host>` for the row, `row.<host>.<field>`
    /// for one of its edit form's fields.
    errors: BTreeMap<String, &'static str>,
    /// The add form as posted, by field, shown again after a refusal.
    form: BTreeMap<String, String>,
    /// A refused edit form as posted: by host, then by field.
    rows: BTreeMap<String, BTreeMap<String, String>>,
    notice: Option<&'static str>,
}

fn render(state: &PageState, visitor: &Visitor, status: StatusCode, shown: Shown) -> Response {
    let rows: Vec<Value> = state
        .links
        .domains()
        .list()
        .iter()
        .map(|d| {
            let view = DomainView::new(d);
            let text = |v: &Option<serde_json::Value>| {
                v.as_ref()
                    .and_then(|v| serde_json::to_string_pretty(v).ok())
                    .unwrap_or_default()
            };
            // A refused edit shows what was typed, not what is stored.
            let posted = shown.rows.get(&d.host);
            let again = |name: &str, stored: String| match posted {
                Some(fields) => fields.get(name).cloned().unwrap_or_default(),
                None => stored,
            };
            let urls: BTreeMap<&str, String> = ["root_url", "not_found_url", "other_url"]
                .into_iter()
                .map(|name| {
                    let stored = match name {
                        "root_url" => view.root_url.clone(),
                        "not_found_url" => view.not_found_url.clone(),
                        _ => view.other_url.clone(),
                    };
                    (name, again(name, stored.unwrap_or_default()))
                })
                .collect();
            context! {
                aasa => again("apple_app_site_association", text(&view.apple_app_site_association)),
                assetlinks => again("assetlinks", text(&view.assetlinks)),
                urls => urls,
                team => again("team", view.team.clone().unwrap_or_default()),
                open => posted.is_some(),
                d => Value::from_serialize(view),
            }
        })
        .collect();
    let dir = state.accounts.directory();
    let mut teams: Vec<String> = dir.teams().map(|t| t.slug.clone()).collect();
    teams.sort();
    page(
        state,
        visitor,
        status,
        "domains.html",
        "domains",
        context! {
            rows => rows,
            teams => teams,
            errors => shown.errors,
            form => shown.form,
            notice => shown.notice,
        },
    )
}

/// A text field: empty is none.
fn text(fields: &HashMap<String, String>, name: &str) -> Option<String> {
    field(fields, name)
        .map(str::to_string)
        .filter(|v| !v.is_empty())
}

/// A JSON field: empty is none; anything else must be JSON (400 naming it).
fn json_field(
    fields: &HashMap<String, String>,
    name: &'static str,
) -> Result<Option<serde_json::Value>, ApiError> {
    match text(fields, name) {
        None => Ok(None),
        Some(raw) => serde_json::from_str(&raw).map(Some).map_err(|e| {
            ApiError::bad_request("invalid_json", name, format!("`{name}` is not JSON: {e}"))
        }),
    }
}

/// A team the domain goes to must exist.
fn check_team(state: &PageState, team: Option<&str>) -> Result<(), ApiError> {
    match team {
        Some(slug) if state.accounts.directory().team(slug).is_none() => Err(
            ApiError::bad_request("invalid_team", "team", format!("no team `{slug}`")),
        ),
        _ => Ok(()),
    }
}

/// `GET /ui/domains` (`?done=` after a change).
pub async fn list(
    State(state): State<PageState>,
    visitor: Visitor,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if let Err(r) = admin(&state, &visitor) {
        return *r;
    }
    let notice = match query.get("done").map(String::as_str) {
        Some("created") => Some("created"),
        Some("changed") => Some("changed"),
        Some("deleted") => Some("deleted"),
        _ => None,
    };
    render(
        &state,
        &visitor,
        StatusCode::OK,
        Shown {
            notice,
            ..Shown::default()
        },
    )
}

/// `POST /ui/domains` (`host`, `team`, `root_url`, `not_found_url`, `other_url`,
/// `apple_app_site_association`, `assetlinks`): adds a domain; a well-known file that is not
/// JSON is refused naming its field (`invalid_json`), nothing written.
pub async fn create(
    State(state): State<PageState>,
    visitor: Visitor,
    CheckedForm(fields): CheckedForm,
) -> Response {
    if let Err(r) = admin(&state, &visitor) {
        return *r;
    }
    let new = (|| {
        let new = NewDomain {
            host: text(&fields, "host").unwrap_or_default(),
            team: text(&fields, "team"),
            root_url: text(&fields, "root_url"),
            not_found_url: text(&fields, "not_found_url"),
            other_url: text(&fields, "other_url"),
            apple_app_site_association: json_field(&fields, "apple_app_site_association")?,
            assetlinks: json_field(&fields, "assetlinks")?,
        };
        check_team(&state, new.team.as_deref())?;
        Ok::<_, ApiError>(new)
    })();
    let result = match new {
        Err(e) => Err(e),
        Ok(new) => {
            let links = state.links.clone();
            blocking(move || {
                let now = links.now();
                links.domains().add(new, now)
            })
            .await
        }
    };
    match result {
        Ok(_) => see_other("/ui/domains?done=created"),
        Err(e) => {
            let refusal = Refusal::of(e);
            let form = ADD_FIELDS
                .iter()
                .filter_map(|k| Some((k.to_string(), fields.get(*k)?.clone())))
                .collect();
            let status = refusal.status;
            render(
                &state,
                &visitor,
                status,
                Shown {
                    errors: refusal.errors(""),
                    form,
                    ..Shown::default()
                },
            )
        }
    }
}

/// `POST /ui/domains/{host}` with `action`: `save` (team, redirects, well-known files; an
/// empty field clears it) or `delete`.
pub async fn change(
    State(state): State<PageState>,
    visitor: Visitor,
    Path(host): Path<String>,
    CheckedForm(fields): CheckedForm,
) -> Response {
    if let Err(r) = admin(&state, &visitor) {
        return *r;
    }
    let links = state.links.clone();
    let result: Result<&str, ApiError> = match field(&fields, "action").unwrap_or_default() {
        "delete" => {
            let host = host.clone();
            blocking(move || links.domains().delete(&host))
                .await
                .map(|()| "deleted")
        }
        "save" => {
            let patch = (|| {
                let team = text(&fields, "team");
                check_team(&state, team.as_deref())?;
                Ok::<_, ApiError>(DomainPatch {
                    team: Some(team),
                    root_url: Some(text(&fields, "root_url")),
                    not_found_url: Some(text(&fields, "not_found_url")),
                    other_url: Some(text(&fields, "other_url")),
                    apple_app_site_association: Some(json_field(
                        &fields,
                        "apple_app_site_association",
                    )?),
                    assetlinks: Some(json_field(&fields, "assetlinks")?),
                })
            })();
            match patch {
                Err(e) => Err(e),
                Ok(mut patch) => {
                    // The default domain belongs to no team: its form has no team field.
                    if links
                        .domains()
                        .by_host(&host)
                        .is_some_and(|d| d.is_default())
                    {
                        patch.team = None;
                    }
                    let host = host.clone();
                    blocking(move || {
                        let now = links.now();
                        links.domains().patch(&host, patch, now)
                    })
                    .await
                    .map(|_| "changed")
                }
            }
        }
        _ => return message(&state, &visitor, StatusCode::BAD_REQUEST, "msg.bad_form"),
    };
    match result {
        Ok(done) => see_other(&format!("/ui/domains?done={done}")),
        Err(e) => {
            let refusal = Refusal::of(e);
            let status = refusal.status;
            // A refusal of one of the edit form's fields is shown under it, the form open
            // with what was typed; any other (a delete's) above the row.
            let mut shown = Shown::default();
            let Some(host) = state.links.domains().by_host(&host).map(|d| d.host.clone()) else {
                // No row to show it on (deleted meanwhile, or a made-up path): above the list.
                shown.errors.insert("list".into(), refusal.code);
                return render(&state, &visitor, status, shown);
            };
            if EDIT_FIELDS.contains(&refusal.field.as_str()) {
                shown
                    .errors
                    .insert(format!("row.{host}.{}", refusal.field), refusal.code);
                shown.rows.insert(
                    host,
                    EDIT_FIELDS
                        .iter()
                        .filter_map(|k| Some((k.to_string(), fields.get(*k)?.clone())))
                        .collect(),
                );
            } else {
                shown.errors.insert(format!("row.{host}"), refusal.code);
            }
            render(&state, &visitor, status, shown)
        }
    }
}
