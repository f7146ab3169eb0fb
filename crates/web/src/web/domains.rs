//! How a domain (SPEC §26) is shown, by the API and the pages alike.

use serde::Serialize;

use crate::links::rfc3339;
use crate::model::Domain;

/// A domain as the API shows it.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct DomainView {
    pub host: String,
    /// The base URL's host: patched, never deleted.
    pub default: bool,
    pub team: Option<String>,
    pub root_url: Option<String>,
    pub not_found_url: Option<String>,
    pub other_url: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub apple_app_site_association: Option<serde_json::Value>,
    #[schema(value_type = Option<Object>)]
    pub assetlinks: Option<serde_json::Value>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
}

impl DomainView {
    pub fn new(domain: &Domain) -> Self {
        let json =
            |text: &Option<String>| text.as_deref().and_then(|t| serde_json::from_str(t).ok());
        let time = |ms: u64| (ms > 0).then(|| rfc3339(ms));
        Self {
            host: domain.host.clone(),
            default: domain.is_default(),
            team: domain.team.clone(),
            root_url: domain.root_url.clone(),
            not_found_url: domain.not_found_url.clone(),
            other_url: domain.other_url.clone(),
            apple_app_site_association: json(&domain.apple_app_site_association),
            assetlinks: json(&domain.assetlinks),
            created_at: time(domain.created_at),
            updated_at: time(domain.updated_at),
        }
    }
}
