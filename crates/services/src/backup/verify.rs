//! Reading a backup file and checking it whole before anything is written from it: plain
//! JSON lines or zstd (told apart by the first bytes, not the name), every line a whole
//! record, and the `end` line last with the count and SHA-256 of the lines before it. A cut
//! file shows as a torn line (named by its number) or a missing `end` line; a changed one as
//! the `end` line whose checksum fails.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::records::Record;
use crate::BoxError;

/// zstd's frame magic number, as it appears first in a file.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// The longest line a backup may hold: far above any record the server writes (a link's URL,
/// title, tags and options are each bounded), so that a damaged file cannot make the check
/// read gigabytes into one buffer.
const MAX_LINE: u64 = 16 * 1024 * 1024;

/// What a whole, unchanged backup holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verified {
    /// Lines before the `end` line.
    pub records: u64,
    pub links: u64,
    pub visits: u64,
    pub leads: u64,
    pub accounts: u64,
    /// Whether the file is zstd-compressed.
    pub compressed: bool,
}

/// Opens a backup file for reading, decompressing it when its first bytes are zstd's.
pub fn open_backup(path: &Path) -> Result<(Box<dyn BufRead + Send>, bool), BoxError> {
    let cannot = |e: io::Error| format!("cannot read {}: {e}", path.display());
    let mut file = File::open(path).map_err(cannot)?;
    let mut head = [0u8; 4];
    let mut got = 0;
    while got < head.len() {
        match file.read(&mut head[got..]).map_err(cannot)? {
            0 => break,
            n => got += n,
        }
    }
    let file = File::open(path).map_err(cannot)?;
    if got == head.len() && head == ZSTD_MAGIC {
        let decoder = zstd::Decoder::new(file).map_err(cannot)?;
        Ok((
            Box::new(BufReader::with_capacity(256 * 1024, decoder)),
            true,
        ))
    } else {
        Ok((Box::new(BufReader::with_capacity(256 * 1024, file)), false))
    }
}

/// Reads `input` to its end and checks it (see the module documentation); the error names the
/// line where the damage shows.
pub fn verify(input: &mut dyn BufRead) -> Result<Verified, BoxError> {
    let mut verified = Verified::default();
    let mut sha = Sha256::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        number += 1;
        let read = (&mut *input)
            .take(MAX_LINE + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| {
                format!("line {number}: the file cannot be read there (cut short or damaged: {e})")
            })?;
        if read == 0 {
            return Err(format!(
                "line {number}: the file ends without its end line: it was cut short after line {}",
                number - 1
            )
            .into());
        }
        if line.last() != Some(&b'\n') {
            if read as u64 > MAX_LINE {
                return Err(format!("line {number}: longer than 16 MiB: not a backup").into());
            }
            return Err(format!(
                "line {number}: torn (it ends without a newline: the file was cut short)"
            )
            .into());
        }
        let record: Record = serde_json::from_slice(&line)
            .map_err(|e| format!("line {number}: not a whole record ({e})"))?;
        match record {
            Record::End(end) => {
                let sum = hex::encode(sha.finalize_reset());
                if end.records != verified.records || end.sha256 != sum {
                    return Err(format!(
                        "line {number} (the end line): the checksum of the {} lines before it \
                         does not match: the file was changed",
                        verified.records
                    )
                    .into());
                }
                let mut rest = [0u8; 1];
                if input
                    .read(&mut rest)
                    .map_err(|e| format!("line {}: {e}", number + 1))?
                    > 0
                {
                    return Err(format!("line {}: data after the end line", number + 1).into());
                }
                return Ok(verified);
            }
            Record::Link(_) => verified.links += 1,
            Record::Visit(_) => verified.visits += 1,
            Record::Lead(_) => verified.leads += 1,
            Record::Account(_) => verified.accounts += 1,
            Record::Key(_) | Record::Domain(_) => {}
        }
        sha.update(&line);
        verified.records += 1;
    }
}
