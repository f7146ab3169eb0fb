//! What `import` is asked to do: the format it reads and how ([`ImportOptions`]), shared by
//! the import and the CSV formats' readers.

/// The formats `import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Our own export (JSON lines).
    Vsl,
    /// YOURLS's `yourls_url` table as CSV: keyword,url,title,timestamp,ip,clicks.
    YourlsCsv,
    /// Shlink's short-URL CSV export (createdAt,domain,shortCode,shortUrl,longUrl,title,tags,visits).
    ShlinkCsv,
    /// Any CSV with a header naming a long-URL column and optionally a short-code column.
    Csv,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "vsl" => Ok(Format::Vsl),
            "yourls-csv" => Ok(Format::YourlsCsv),
            "shlink-csv" => Ok(Format::ShlinkCsv),
            "csv" => Ok(Format::Csv),
            other => Err(format!(
                "`{other}` is not a format: vsl, yourls-csv, shlink-csv or csv"
            )),
        }
    }
}

/// How `import` runs.
#[derive(Clone, Debug)]
pub struct ImportOptions {
    pub format: Format,
    pub dry_run: bool,
    /// `csv`: the long-URL column's header (else guessed).
    pub url_column: Option<String>,
    /// `csv`: the short-code column's header (else guessed; none is fine).
    pub code_column: Option<String>,
    /// A carried key (the `hash` secret) replaces the store's own: only for a restore into a
    /// store with no link, whose own key decided no code yet.
    pub replace_keys: bool,
}
