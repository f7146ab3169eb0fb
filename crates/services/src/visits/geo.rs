//! Offline geolocation from a MaxMind-format database: country, region, city and ISP
//! of a visitor's address. Reads only; never fails a visit — a missing answer is empty fields.
//! Behind the `geo` feature (a default): without it `visits.geo_db` is a config error and no
//! [`GeoDb`] can exist.

use std::net::IpAddr;
use std::path::Path;

#[cfg(feature = "geo")]
use maxminddb::Reader;
#[cfg(feature = "geo")]
use serde::Deserialize;

/// Where a visit came from; each field is `None` when the database does not say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Geo {
    /// ISO 3166-1 alpha-2 code, e.g. `US`.
    pub country: Option<String>,
    /// English name of the first (largest) subdivision, or its ISO code when it has no name.
    pub region: Option<String>,
    /// English city name.
    pub city: Option<String>,
    /// ISP, else organisation, else the autonomous system's organisation.
    pub isp: Option<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot open the geolocation database {path}: {detail}")]
pub struct GeoError {
    pub path: String,
    pub detail: String,
}

/// A MaxMind DB (GeoIP2/GeoLite2 City, ISP or ASN, or any database with the same field names)
/// held in memory: City databases are tens of MiB and every visit is looked up, so no file I/O
/// happens after start-up.
pub struct GeoDb {
    #[cfg(feature = "geo")]
    reader: Reader<Vec<u8>>,
    /// Without the feature there is no reader, and no value of this type.
    #[cfg(not(feature = "geo"))]
    never: std::convert::Infallible,
}

pub use crate::config::WITHOUT_GEO;

#[cfg(not(feature = "geo"))]
impl GeoDb {
    pub fn open(path: &Path) -> Result<GeoDb, GeoError> {
        Err(GeoError {
            path: path.display().to_string(),
            detail: WITHOUT_GEO.into(),
        })
    }

    pub fn database_type(&self) -> &str {
        match self.never {}
    }

    pub fn lookup(&self, _ip: IpAddr) -> Geo {
        match self.never {}
    }
}

#[cfg(feature = "geo")]
impl GeoDb {
    pub fn open(path: &Path) -> Result<GeoDb, GeoError> {
        let reader = Reader::open_readfile(path).map_err(|e| GeoError {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        Ok(GeoDb { reader })
    }

    /// The database's own name for its kind, e.g. `GeoLite2-City`; worth logging at start.
    pub fn database_type(&self) -> &str {
        &self.reader.metadata().database_type
    }

    /// Looks `ip` up. An address the database does not cover, or a record that does not
    /// decode, gives empty fields: geolocation is best effort and must not cost a visit.
    pub fn lookup(&self, ip: IpAddr) -> Geo {
        // IPv4-mapped addresses are looked up as IPv4: not every database aliases `::ffff:0:0/96`.
        let ip = ip.to_canonical();
        let record = self
            .reader
            .lookup(ip)
            .and_then(|result| result.decode::<Record>());
        match record {
            Ok(Some(record)) => record.into_geo(),
            Ok(None) => Geo::default(),
            Err(error) => {
                tracing::debug!(%ip, %error, "geolocation lookup failed");
                Geo::default()
            }
        }
    }
}

#[cfg(feature = "geo")]
/// The union of the GeoIP2 City, ISP and ASN record fields we read; all optional, so one
/// struct decodes any of those databases. Strings borrow from the in-memory file, and fields
/// not named here are skipped without allocating.
#[derive(Deserialize)]
struct Record<'a> {
    #[serde(borrow)]
    country: Option<Country<'a>>,
    /// Where the block is registered; a fallback for addresses with no located country.
    #[serde(borrow)]
    registered_country: Option<Country<'a>>,
    #[serde(borrow)]
    subdivisions: Option<Vec<Place<'a>>>,
    #[serde(borrow)]
    city: Option<Place<'a>>,
    #[serde(borrow)]
    isp: Option<&'a str>,
    #[serde(borrow)]
    organization: Option<&'a str>,
    #[serde(borrow)]
    autonomous_system_organization: Option<&'a str>,
}

#[cfg(feature = "geo")]
#[derive(Deserialize)]
struct Country<'a> {
    #[serde(borrow)]
    iso_code: Option<&'a str>,
}

#[cfg(feature = "geo")]
#[derive(Deserialize)]
struct Place<'a> {
    #[serde(borrow)]
    iso_code: Option<&'a str>,
    #[serde(borrow)]
    names: Option<Names<'a>>,
}

#[cfg(feature = "geo")]
#[derive(Deserialize)]
struct Names<'a> {
    #[serde(borrow)]
    en: Option<&'a str>,
}

#[cfg(feature = "geo")]
impl Record<'_> {
    fn into_geo(self) -> Geo {
        let country = [self.country, self.registered_country]
            .into_iter()
            .flatten()
            .find_map(|c| present(c.iso_code));
        let region = self
            .subdivisions
            .and_then(|subdivisions| subdivisions.into_iter().next())
            .and_then(|first| {
                present(first.names.and_then(|n| n.en)).or_else(|| present(first.iso_code))
            });
        let city = self.city.and_then(|city| present(city.names?.en));
        let isp = present(self.isp)
            .or_else(|| present(self.organization))
            .or_else(|| present(self.autonomous_system_organization));
        Geo {
            country,
            region,
            city,
            isp,
        }
    }
}

/// A non-empty string, owned.
#[cfg(feature = "geo")]
fn present(value: Option<&str>) -> Option<String> {
    value
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// The test database builder the integration tests use too (a `#[path]` inside `mod tests`
/// would resolve under `visits/geo/`).
#[cfg(all(test, feature = "geo"))]
#[path = "../../../../tests/common/mmdb.rs"]
mod test_mmdb;

#[cfg(all(test, feature = "geo"))]
mod tests {
    use super::*;

    use super::test_mmdb as mmdb;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    fn geo(country: &str, region: &str, city: &str, isp: &str) -> Geo {
        Geo {
            country: Some(country.into()),
            region: Some(region.into()),
            city: Some(city.into()),
            isp: Some(isp.into()),
        }
    }

    fn test_db() -> (tempfile::TempDir, GeoDb) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("geo.mmdb");
        mmdb::write_test_geo_db(&path);
        let db = GeoDb::open(&path).expect("open the test database");
        (dir, db)
    }

    #[test]
    fn looks_up_ipv4_ipv6_and_loopback() {
        let (_dir, db) = test_db();
        assert_eq!(db.database_type(), "GeoIP2-City");
        let london = geo("GB", "England", "London", "Test ISP GB");
        assert_eq!(db.lookup(ip("81.2.69.160")), london);
        assert_eq!(db.lookup(ip("::ffff:81.2.69.1")), london);
        assert_eq!(
            db.lookup(ip("2001:db8:1::5")),
            geo("DE", "Berlin", "Berlin", "Test ISP DE")
        );
        let loopback = geo("ZZ", "Localhost Region", "Loopback City", "Loopback ISP");
        assert_eq!(db.lookup(ip("127.0.0.1")), loopback);
        assert_eq!(db.lookup(ip("127.255.0.9")), loopback);
    }

    #[test]
    fn unknown_addresses_give_empty_fields() {
        let (_dir, db) = test_db();
        for unknown in [
            "81.2.70.1",
            "8.8.8.8",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "2001:db9::1",
        ] {
            assert_eq!(db.lookup(ip(unknown)), Geo::default(), "{unknown}");
        }
    }

    #[test]
    fn isp_falls_back_to_organisation_then_asn() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("asn.mmdb");
        mmdb::write_geo_db(
            &path,
            "GeoLite2-ASN",
            &[
                (
                    "192.0.2.0/24",
                    serde_json::json!({
                        "autonomous_system_number": 64500,
                        "autonomous_system_organization": "Example AS",
                    }),
                ),
                (
                    "198.51.100.0/24",
                    serde_json::json!({ "organization": "Example Org", "isp": "" }),
                ),
                (
                    "203.0.113.0/24",
                    // A region known only by code, and a country only by registration.
                    serde_json::json!({
                        "registered_country": { "iso_code": "FR" },
                        "subdivisions": [ { "iso_code": "IDF" } ],
                    }),
                ),
            ],
        );
        let db = GeoDb::open(&path).expect("open the ASN database");
        let isp = |isp: &str| Geo {
            isp: Some(isp.into()),
            ..Geo::default()
        };
        assert_eq!(db.lookup(ip("192.0.2.1")), isp("Example AS"));
        assert_eq!(db.lookup(ip("198.51.100.1")), isp("Example Org"));
        let paris = Geo {
            country: Some("FR".into()),
            region: Some("IDF".into()),
            ..Geo::default()
        };
        assert_eq!(db.lookup(ip("203.0.113.1")), paris);
    }

    #[test]
    fn a_record_of_the_wrong_shape_gives_empty_fields() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("odd.mmdb");
        mmdb::write_geo_db(
            &path,
            "Odd",
            &[
                ("192.0.2.0/24", serde_json::json!("just a string")),
                ("198.51.100.0/24", serde_json::json!({ "country": "GB" })),
            ],
        );
        let db = GeoDb::open(&path).expect("open the odd database");
        assert_eq!(db.lookup(ip("192.0.2.1")), Geo::default());
        assert_eq!(db.lookup(ip("198.51.100.1")), Geo::default());
    }

    #[test]
    fn garbage_and_missing_files_are_errors() {
        let dir = tempfile::tempdir().expect("temp dir");
        let garbage = dir.path().join("garbage.mmdb");
        std::fs::write(&garbage, b"this is not a MaxMind database").expect("write garbage");
        let error = GeoDb::open(&garbage).err().expect("garbage must not open");
        assert!(error.path.ends_with("garbage.mmdb"), "{error}");
        assert!(!error.detail.is_empty());

        let missing = dir.path().join("missing.mmdb");
        assert!(GeoDb::open(&missing).is_err());
    }
}
