//! The code filter's file in the data directory: `watermark ++ filter bytes`.
//!
//! The watermark is the store's issued-codes counter at the moment the filter was copied; at
//! open, a file whose watermark differs from the counter is stale and the filter is rebuilt
//! from the trees. Files are replaced atomically (write, fsync, rename, fsync the directory),
//! so a crash leaves the old file or the new one, never half of one.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use crate::codes::filter::CodeFilter;

const HEADER: &[u8; 8] = b"VSLFILT1";

/// Reads the filter and its watermark; `Ok(None)` when there is no file.
pub fn load(path: &Path) -> io::Result<Option<(u64, CodeFilter)>> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    if bytes.len() < 16 || &bytes[..8] != HEADER {
        return Err(invalid("not a code filter file".into()));
    }
    let mut watermark = [0u8; 8];
    watermark.copy_from_slice(&bytes[8..16]);
    let filter = CodeFilter::from_bytes(&bytes[16..]).map_err(|e| invalid(e.to_string()))?;
    Ok(Some((u64::from_be_bytes(watermark), filter)))
}

/// Replaces the file atomically.
pub fn save(path: &Path, watermark: u64, filter: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut file = File::create(&tmp)?;
        file.write_all(HEADER)?;
        file.write_all(&watermark.to_be_bytes())?;
        file.write_all(filter)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}
