//! A small MaxMind-format database for tests, written with `maxminddb-writer`: a few networks
//! with City and ISP fields in one record, so the geolocation code sees every field it reads.
//! Shared by `src/visits/geo.rs` unit tests (through `#[path]`) and the integration tests.

#![allow(dead_code)]

use std::net::IpAddr;
use std::path::Path;

use maxminddb_writer::metadata::IpVersion;
use maxminddb_writer::paths::IpAddrWithMask;
use maxminddb_writer::Database;

/// (network, country ISO code, region, city, ISP)
pub const TEST_GEO_NETWORKS: &[(&str, &str, &str, &str, &str)] = &[
    ("81.2.69.0/24", "GB", "England", "London", "Test ISP GB"),
    ("2001:db8::/32", "DE", "Berlin", "Berlin", "Test ISP DE"),
    // Integration tests reach the server from 127.0.0.1, so their visits get geo fields too.
    (
        "127.0.0.0/8",
        "ZZ",
        "Localhost Region",
        "Loopback City",
        "Loopback ISP",
    ),
];

/// Writes the test database to `path`. Panics on failure: it is test set-up.
pub fn write_test_geo_db(path: &Path) {
    let records: Vec<_> = TEST_GEO_NETWORKS
        .iter()
        .map(|&(network, country, region, city, isp)| {
            let record = serde_json::json!({
                "country": { "iso_code": country, "names": { "en": format!("Country {country}") } },
                "subdivisions": [ { "iso_code": "X1", "names": { "en": region } } ],
                "city": { "names": { "en": city } },
                "isp": isp,
                "organization": format!("{isp} Org"),
                "autonomous_system_organization": format!("{isp} AS"),
            });
            (network, record)
        })
        .collect();
    write_geo_db(path, "GeoIP2-City", &records);
}

/// Writes an IPv6 database (IPv4 networks included) mapping each network to its record.
/// The writer turns `None` and JSON `null` into booleans, so records should hold only present
/// fields.
pub fn write_geo_db(path: &Path, database_type: &str, records: &[(&str, serde_json::Value)]) {
    let mut db = Database::default();
    db.metadata.ip_version = IpVersion::V6;
    db.metadata.database_type = database_type.into();
    db.metadata.languages = vec!["en".into()];
    // The writer defaults the format version to 0, which readers reject.
    db.metadata.binary_format_major_version = 2;
    db.metadata.binary_format_minor_version = 0;
    db.metadata
        .description
        .insert("en".into(), "vshortlink test database".into());

    for (network, record) in records {
        let data = db
            .insert_value(record)
            .expect("serialise a test geo record");
        let network: IpAddrWithMask = network.parse().expect("test network");
        for path in ipv6_paths(network) {
            db.insert_node(path, data);
        }
    }

    let file = std::fs::File::create(path).expect("create the test geo database");
    db.write_to(std::io::BufWriter::new(file))
        .expect("write the test geo database")
        .into_inner()
        .expect("flush the test geo database");
}

/// The writer walks the bits it is given, so in an IPv6 tree an IPv4 network must be placed
/// where readers look for it: `::a.b.c.d` (`::/96`, where `maxminddb` finds the IPv4 subtree)
/// and, as MaxMind's own databases do, the IPv4-mapped `::ffff:a.b.c.d`.
fn ipv6_paths(network: IpAddrWithMask) -> Vec<IpAddrWithMask> {
    match network.addr {
        IpAddr::V6(_) => vec![network],
        IpAddr::V4(v4) => {
            let mask = network.mask + 96;
            vec![
                IpAddrWithMask::new(IpAddr::V6(v4.to_ipv6_compatible()), mask),
                IpAddrWithMask::new(IpAddr::V6(v4.to_ipv6_mapped()), mask),
            ]
        }
    }
}
