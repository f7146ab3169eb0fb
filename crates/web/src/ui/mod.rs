//! The web pages (see docs/web-interface.md): shorten at `/`, sign in and out, the links, one
//! link's statistics, the dashboard, the review of destinations (admins), and the 404/410
//! pages — server-rendered from templates compiled into the binary, in English and Simplified
//! Chinese, working without JavaScript.
//!
//! - `render` — the template environment, the [`Visitor`] extractor (language, session, form
//!   token), security headers
//! - `i18n` — the catalogues and language choice
//! - `session` — sessions, cookies, form tokens
//! - `assets` — embedded stylesheet, script and icon
//! - `chart` — SVG bar charts
//! - `home`, `login`, `links`, `dashboard`, `reviews` — the pages' handlers: thin, they call
//!   the same domain services as the API, never the store
//! - `oidc` — sign-in through an OpenID Connect provider: the start, the callback, their
//!   failure pages
//! - `account`, `users`, `teams`, `audit` — people: one's own account and keys, the users
//!   (admins), teams and their members and keys, the audit log
//! - `errors` — the 404/410 pages the redirect path serves

pub mod account;
pub mod assets;
pub mod audit;
pub mod batch;
pub mod chart;
pub mod dashboard;
pub mod domains;
pub mod errors;
pub mod forms;
pub mod gates;
pub mod home;
pub mod i18n;
pub mod links;
pub mod login;
pub mod oidc;
pub mod render;
pub mod reviews;
pub mod session;
pub mod teams;
pub mod users;

use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;

use crate::clock::Clock;
use crate::config::Config;
use crate::web::state::AppState;

pub use render::Visitor;

/// Everything the pages need that lives as long as the server.
pub struct Ui {
    pub templates: render::Templates,
    pub catalogues: i18n::Catalogues,
    pub assets: assets::Assets,
    pub sessions: session::Sessions,
    /// Results of recent "many at once" shortenings, for their CSV download.
    pub batches: batch::RecentBatches,
    pub errors: errors::ErrorPages,
    /// Cookies get `Secure` when the public base URL is https.
    pub secure_cookies: bool,
    /// The `[[auth.oidc]]` providers, built once at start (nothing fetched until a sign-in).
    pub providers: Arc<crate::accounts::oidc::Providers>,
    /// Started OpenID sign-ins wait here for their callback (shared between instances on
    /// PostgreSQL, like the sessions).
    pub records: Arc<crate::records::RecordCache>,
    pub clock: Arc<dyn Clock>,
}

/// Anything that stops the pages from being built (a template or catalogue that does not parse).
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    #[error("template: {0}")]
    Template(#[from] minijinja::Error),
    #[error(transparent)]
    Catalogue(#[from] i18n::CatalogueError),
}

impl Ui {
    pub fn new(
        config: &Config,
        base_url: &str,
        clock: Arc<dyn Clock>,
        records: Arc<crate::records::RecordCache>,
        providers: Arc<crate::accounts::oidc::Providers>,
    ) -> Result<Self, UiError> {
        let catalogues = i18n::Catalogues::load()?;
        let templates = render::Templates::new()?;
        let assets = assets::Assets::new();
        let errors =
            errors::ErrorPages::new(&templates, &catalogues, &assets.versioned("app.css"))?;
        let ttl = config.ui.session_ttl.millis().unwrap_or(u64::MAX);
        Ok(Self {
            templates,
            catalogues,
            assets,
            sessions: session::Sessions::new(
                ttl,
                config.auth.session_ttl.millis().unwrap_or(u64::MAX),
                clock.clone(),
                records.clone(),
            ),
            batches: batch::RecentBatches::new(clock.clone(), records.clone()),
            errors,
            secure_cookies: base_url.starts_with("https://"),
            providers,
            records,
            clock,
        })
    }
}

/// The pages' routes, merged into the main router.
pub fn router(state: PageState) -> Router<AppState> {
    Router::new()
        .route("/", get(home::show).post(home::shorten))
        .route("/ui/batch/{id}", get(batch::download))
        .route("/ui/login", get(login::show).post(login::sign_in))
        .route("/ui/logout", post(login::sign_out))
        .route("/ui/lang", get(login::switch_language))
        .route("/ui/oidc/{name}", get(oidc::start))
        .route("/ui/oidc/{name}/callback", get(oidc::callback))
        .route("/ui/account", get(account::show))
        .route("/ui/account/password", post(account::change_password))
        .route("/ui/account/keys", post(account::make_key))
        .route("/ui/keys/{id}/revoke", post(account::revoke_key))
        .route("/ui/admin/users", get(users::list).post(users::create))
        .route("/ui/admin/users/{id}", post(users::change))
        .route("/ui/admin/audit", get(audit::list))
        .route("/ui/domains", get(domains::list).post(domains::create))
        .route("/ui/domains/{host}", post(domains::change))
        .route("/ui/teams", get(teams::list).post(teams::create))
        .route("/ui/teams/{slug}", get(teams::show))
        .route("/ui/teams/{slug}/members", post(teams::members))
        .route("/ui/teams/{slug}/plan", post(teams::set_plan))
        .route("/ui/links", get(links::list))
        .route("/ui/links/{code}", get(links::detail))
        .route("/ui/links/{code}/edit", post(links::edit))
        .route("/ui/links/{code}/delete", post(links::delete))
        .route("/ui/links/{code}/qr", get(links::qr))
        .route("/ui/links/{code}/visits.csv", get(links::visits_csv))
        .route("/ui/links/{code}/leads.csv", get(links::leads_csv))
        .route("/ui/dashboard", get(dashboard::show))
        .route("/ui/pools/{length}/refill", post(dashboard::refill))
        .route("/ui/reviews", get(reviews::list))
        .route("/ui/reviews/{code}", post(reviews::decide))
        .route(
            "/ui/reviews/{code}/{review_id}/screenshot.png",
            get(reviews::screenshot),
        )
        .route("/static/{name}", get(assets::serve))
        .layer(axum::middleware::from_fn(render::security_headers))
        // Pages and assets are text: gzip makes a first visit about a third of the bytes.
        .layer(tower_http::compression::CompressionLayer::new().gzip(true))
        .with_state(state)
}

/// What a page handler reaches: the services every handler reaches ([`AppState`], through
/// `Deref`) and the pages' own parts ([`Ui`]).
#[derive(Clone)]
pub struct PageState {
    app: AppState,
    pub ui: Arc<Ui>,
}

impl PageState {
    pub fn new(app: AppState, ui: Arc<Ui>) -> Self {
        Self { app, ui }
    }
}

impl std::ops::Deref for PageState {
    type Target = AppState;

    fn deref(&self) -> &AppState {
        &self.app
    }
}

impl axum::extract::FromRef<PageState> for AppState {
    fn from_ref(state: &PageState) -> AppState {
        state.app.clone()
    }
}
