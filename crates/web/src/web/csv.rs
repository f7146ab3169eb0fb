//! The CSV downloads the API and the pages both serve: a link's visits and a link's leads,
//! streamed a store page at a time through the one [`CsvWriter`], so an export of any size
//! holds a page in memory.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue};
use axum::response::Response;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::csv_safe::CsvWriter;
use crate::leads::{Leads, CSV_PAGE as LEADS_PAGE};
use crate::links::rfc3339;
use crate::model::options::App;
use crate::model::{Link, Visit};
use crate::visits::Statistics;
use crate::web::access::blocking;
use crate::web::error::ApiError;

/// Visits read per store call while streaming CSV: bounds the memory of one export.
pub const CSV_PAGE: usize = 1000;
/// CSV chunks buffered ahead of a slow client.
const CSV_AHEAD: usize = 4;

/// A visit as the API and the CSV export show it.
#[derive(Serialize)]
pub struct VisitView {
    id: u64,
    at: String,
    code: String,
    client_id: Arc<str>,
    ip: Option<Arc<str>>,
    user_agent: Arc<str>,
    referer: Arc<str>,
    browser: Arc<str>,
    browser_version: Arc<str>,
    os: Arc<str>,
    os_version: Arc<str>,
    device: Arc<str>,
    is_bot: bool,
    country: Option<Arc<str>>,
    region: Option<Arc<str>>,
    city: Option<Arc<str>>,
    isp: Option<Arc<str>>,
    /// `default`, `rule:N` or `target:N`; `in_app` or `preview` for a visit that stopped at
    /// the page for in-app browsers or for crawlers.
    route: Option<Arc<str>>,
    /// The in-app browser the visit came from (`wechat`, `qq`, …), read from its user agent.
    app: Option<&'static str>,
}

/// The columns of a visits CSV, in the order of [`VisitView::cells`].
const VISIT_COLUMNS: [&str; 19] = [
    "id",
    "at",
    "code",
    "client_id",
    "ip",
    "user_agent",
    "referer",
    "browser",
    "browser_version",
    "os",
    "os_version",
    "device",
    "is_bot",
    "country",
    "region",
    "city",
    "isp",
    "route",
    "app",
];

impl VisitView {
    /// The visit as a CSV row ([`VISIT_COLUMNS`]).
    fn cells(&self) -> [String; 19] {
        let text = |v: &Option<Arc<str>>| v.as_deref().unwrap_or("").to_string();
        [
            self.id.to_string(),
            self.at.clone(),
            self.code.clone(),
            self.client_id.to_string(),
            text(&self.ip),
            self.user_agent.to_string(),
            self.referer.to_string(),
            self.browser.to_string(),
            self.browser_version.to_string(),
            self.os.to_string(),
            self.os_version.to_string(),
            self.device.to_string(),
            self.is_bot.to_string(),
            text(&self.country),
            text(&self.region),
            text(&self.city),
            text(&self.isp),
            text(&self.route),
            self.app.unwrap_or("").to_string(),
        ]
    }
}

impl From<Visit> for VisitView {
    fn from(v: Visit) -> Self {
        let app = App::of_user_agent(&v.user_agent).map(App::as_str);
        VisitView {
            id: v.id,
            at: rfc3339(v.at),
            code: v.code,
            client_id: v.client_id,
            ip: v.ip,
            user_agent: v.user_agent,
            referer: v.referer,
            browser: v.browser,
            browser_version: v.browser_version,
            os: v.os,
            os_version: v.os_version,
            device: v.device,
            is_bot: v.is_bot,
            country: v.country,
            region: v.region,
            city: v.city,
            isp: v.isp,
            // A plain link's visits store no route (nothing to tell apart): theirs is the
            // default.
            route: v.route.or_else(|| Some(Arc::from("default"))),
            app,
        }
    }
}

/// A link's visits as a streamed CSV download.
pub fn csv_response(
    stats: Arc<Statistics>,
    link_id: u64,
    after: Option<u64>,
    code: &str,
) -> Response {
    let mut response = Response::new(csv_body(stats, link_id, after));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"visits-{code}.csv\""))
    {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    response
}

/// Every visit of a link (after `after`) as a CSV body, streamed one store page
/// (`CSV_PAGE` visits) per chunk: at most `CSV_AHEAD` chunks wait for a slow client, so an
/// export of any size holds a few thousand visits in memory.
pub fn csv_body(stats: Arc<Statistics>, link_id: u64, after: Option<u64>) -> Body {
    let (sender, receiver) = mpsc::channel::<Result<Bytes, std::io::Error>>(CSV_AHEAD);
    tokio::spawn(async move {
        let mut after = after;
        let mut header = true;
        loop {
            let service = stats.clone();
            let page =
                tokio::task::spawn_blocking(move || service.visits(link_id, after, CSV_PAGE)).await;
            let page = match page {
                Ok(Ok(page)) => page,
                Ok(Err(e)) => return fail(&sender, "visit", e.to_string()).await,
                Err(e) => return fail(&sender, "visit", e.to_string()).await,
            };
            let mut writer = CsvWriter::new(Vec::with_capacity(256 * CSV_PAGE));
            if header {
                if let Err(e) = writer.record(VISIT_COLUMNS) {
                    return fail(&sender, "visit", e.to_string()).await;
                }
            }
            header = false;
            for visit in page.items {
                if let Err(e) = writer.record(VisitView::from(visit).cells()) {
                    return fail(&sender, "visit", e.to_string()).await;
                }
            }
            match writer.into_inner() {
                Ok(bytes) => {
                    if sender.send(Ok(Bytes::from(bytes))).await.is_err() {
                        return; // the client went away
                    }
                }
                Err(e) => return fail(&sender, "visit", e.to_string()).await,
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
    });
    Body::from_stream(ReceiverStream::new(receiver))
}

/// Every lead of a link as a CSV download, newest first: `id`, `at`, one column per field
/// name, `consent`. Streamed a store page at a time.
pub async fn leads_csv_response(leads: Arc<Leads>, link: Link) -> Result<Response, ApiError> {
    let code = link.code.clone();
    let names = {
        let (leads, link) = (leads.clone(), link.clone());
        blocking(move || leads.names(&link)).await?
    };
    let mut response = Response::new(leads_csv_body(leads, link.id, names));
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

fn leads_csv_body(leads: Arc<Leads>, link_id: u64, names: Vec<String>) -> Body {
    let (sender, receiver) = mpsc::channel::<Result<Bytes, std::io::Error>>(CSV_AHEAD);
    tokio::spawn(async move {
        let mut before = None;
        let mut first = true;
        loop {
            let service = leads.clone();
            let page =
                tokio::task::spawn_blocking(move || service.page(link_id, before, LEADS_PAGE))
                    .await;
            let page = match page {
                Ok(Ok(page)) => page,
                Ok(Err(e)) => return fail(&sender, "lead", e.to_string()).await,
                Err(e) => return fail(&sender, "lead", e.to_string()).await,
            };
            let mut writer = CsvWriter::new(Vec::with_capacity(128 * LEADS_PAGE));
            let mut row = |cells: Vec<String>| writer.record(cells);
            if first {
                let header = ["id", "at"]
                    .iter()
                    .map(|s| s.to_string())
                    .chain(names.iter().cloned())
                    .chain(std::iter::once("consent".to_string()))
                    .collect();
                if let Err(e) = row(header) {
                    return fail(&sender, "lead", e.to_string()).await;
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
                    return fail(&sender, "lead", e.to_string()).await;
                }
            }
            match writer.into_inner() {
                Ok(bytes) => {
                    if sender.send(Ok(Bytes::from(bytes))).await.is_err() {
                        return;
                    }
                }
                Err(e) => return fail(&sender, "lead", e.to_string()).await,
            }
            match page.next {
                Some(next) => before = Some(next),
                None => break,
            }
        }
    });
    Body::from_stream(ReceiverStream::new(receiver))
}

/// Ends a stream with an error: the client sees a truncated (failed) transfer, not a short
/// file that looks complete.
async fn fail(sender: &mpsc::Sender<Result<Bytes, std::io::Error>>, what: &str, detail: String) {
    tracing::error!(error = %detail, "{what} export failed");
    let _ = sender.send(Err(std::io::Error::other(detail))).await;
}
