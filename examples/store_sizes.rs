//! What a sled data directory is made of: per tree, its records and the bytes of their keys
//! and values, against the bytes sled takes on disk. With `--copy DIR`, it also writes every
//! record into a new store at `DIR` in key order and reports that store's size: about the
//! least sled needs on disk for the same records (no garbage left by rewrites).
//!
//! Usage: `store_sizes DATA_DIR [--copy NEW_DB_DIR]` on a stopped server's data directory
//! (`DATA_DIR/db` is the sled database). The benchmark's data-directory row in the README was
//! read with it.

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: store_sizes DATA_DIR [--copy NEW_DB_DIR]";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(data), copy) = (args.next(), args.next()) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let copy = match (copy.as_deref(), args.next()) {
        (None, _) => None,
        (Some("--copy"), Some(dir)) => Some(PathBuf::from(dir)),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let db = PathBuf::from(data).join("db");
    if !db.join("conf").is_file() {
        // sled would create an empty store there.
        eprintln!("store_sizes: no sled store at {}", db.display());
        return ExitCode::FAILURE;
    }
    match run(db, copy) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("store_sizes: {e}");
            ExitCode::FAILURE
        }
    }
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn run(db_path: PathBuf, copy: Option<PathBuf>) -> sled::Result<()> {
    let db = sled::Config::new().path(&db_path).open()?;
    let mut names = db.tree_names();
    names.sort();
    let (mut total_records, mut total_bytes) = (0u64, 0u64);
    println!("| tree | records | keys | values |\n|---|---|---|---|");
    for name in &names {
        let tree = db.open_tree(name)?;
        let (mut records, mut keys, mut values) = (0u64, 0u64, 0u64);
        for item in tree.iter() {
            let (key, value) = item?;
            records += 1;
            keys += key.len() as u64;
            values += value.len() as u64;
        }
        if records == 0 {
            continue;
        }
        total_records += records;
        total_bytes += keys + values;
        println!(
            "| {} | {records} | {:.1} MB | {:.1} MB |",
            String::from_utf8_lossy(name),
            mb(keys),
            mb(values)
        );
    }
    println!(
        "\n{total_records} records, {:.1} MB of keys and values; sled's files: {:.1} MB",
        mb(total_bytes),
        mb(db.size_on_disk()?)
    );
    if let Some(to) = copy {
        let fresh = sled::Config::new().path(&to).open()?;
        for name in &names {
            let (from, into) = (db.open_tree(name)?, fresh.open_tree(name)?);
            let mut batch = sled::Batch::default();
            for (n, item) in from.iter().enumerate() {
                let (key, value) = item?;
                batch.insert(key, value);
                if n % 10_000 == 9_999 {
                    into.apply_batch(std::mem::take(&mut batch))?;
                }
            }
            into.apply_batch(batch)?;
        }
        fresh.flush()?;
        println!(
            "a copy written in key order ({}): {:.1} MB",
            to.display(),
            mb(fresh.size_on_disk()?)
        );
    }
    Ok(())
}
