//! Every CSV the product writes (a link's visits, a batch's results) goes through [`CsvWriter`],
//! which neutralises formula cells: a cell that begins with `=`, `+`, `-`, `@`, a
//! tab or a carriage return gets a leading `'`, so that a spreadsheet shows it as text instead
//! of evaluating it. Visitors choose their user agent and referer, and the link's owner opens
//! the file: without this, a visit could plant `=HYPERLINK(…)` or a DDE command in it.
//!
//! Knows nothing of HTTP or of the records written; callers pass cells as text.

use std::borrow::Cow;
use std::io::Write;

/// The first characters that make a spreadsheet read a cell as a formula.
const FORMULA_STARTS: &[char] = &['=', '+', '-', '@', '\t', '\r'];

/// The cell as it is written: prefixed with `'` when a spreadsheet would run it.
pub fn neutralise(cell: &str) -> Cow<'_, str> {
    if cell.starts_with(FORMULA_STARTS) {
        Cow::Owned(format!("'{cell}"))
    } else {
        Cow::Borrowed(cell)
    }
}

/// A CSV writer (RFC 4180 quoting by the `csv` crate) whose every cell is neutralised.
pub struct CsvWriter<W: Write> {
    inner: csv::Writer<W>,
}

impl<W: Write> CsvWriter<W> {
    pub fn new(out: W) -> Self {
        Self {
            inner: csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(out),
        }
    }

    /// Writes one row.
    pub fn record<I, S>(&mut self, cells: I) -> csv::Result<()>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for cell in cells {
            self.inner
                .write_field(neutralise(cell.as_ref()).as_bytes())?;
        }
        self.inner.write_record(std::iter::empty::<&[u8]>())
    }

    /// The output, once everything is flushed into it.
    pub fn into_inner(self) -> csv::Result<W> {
        self.inner
            .into_inner()
            .map_err(|e| csv::Error::from(e.into_error()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(rows: &[&[&str]]) -> String {
        let mut writer = CsvWriter::new(Vec::new());
        for row in rows {
            writer.record(row.iter()).expect("write");
        }
        String::from_utf8(writer.into_inner().expect("flush")).expect("utf-8")
    }

    #[test]
    fn formula_cells_are_prefixed_and_others_kept() {
        let out = written(&[&[
            "=cmd|' /C calc'!A0",
            "=HYPERLINK(\"https://evil.example\")",
            "+1",
            "-2",
            "@SUM(A1)",
            "\tx",
            "\rx",
            "Mozilla/5.0",
            "",
            "a=b",
        ]]);
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(out.as_bytes());
        let row = reader.records().next().expect("a row").expect("valid csv");
        let cells: Vec<&str> = row.iter().collect();
        assert_eq!(
            cells,
            [
                "'=cmd|' /C calc'!A0",
                "'=HYPERLINK(\"https://evil.example\")",
                "'+1",
                "'-2",
                "'@SUM(A1)",
                "'\tx",
                "'\rx",
                "Mozilla/5.0",
                "",
                "a=b",
            ]
        );
    }

    #[test]
    fn rows_end_with_a_newline() {
        assert_eq!(written(&[&["a", "b"], &["c", "d"]]), "a,b\nc,d\n");
    }
}
