//! `vshortlink backup --server URL --key KEY --output FILE` (a running server's backup, over
//! its API, written atomically), `vshortlink backup --verify FILE`, and `vshortlink restore
//! FILE` (into a stopped store, after the whole file checked out). The format and its check
//! are [`crate::backup`]'s; this file owns the commands: the HTTP download, the file's
//! atomicity, and the refusals of a restore.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::http::{header, Request, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::import::{import, ImportSummary};
use super::options::{Format, ImportOptions};
use super::progress::Progress;
use crate::backup::{open_backup, verify, Verified};
use crate::config::Config;
use crate::BoxError;

/// How long the server may take to answer, and then to send the next piece of the stream.
const QUIET_LIMIT: Duration = Duration::from_secs(60);

/// What `vshortlink backup` asks the server for.
#[derive(Clone, Debug)]
pub struct BackupArgs {
    pub server: String,
    pub key: String,
    pub output: PathBuf,
    pub visits: bool,
    pub leads: bool,
    pub accounts: bool,
    /// zstd (`?compress=zstd`); plain JSON lines otherwise.
    pub compress: bool,
}

/// `vshortlink backup`: streams the server's backup into a hidden temporary file beside
/// `output`, fsyncs it, checks it whole (its `end` line), and only then renames it to
/// `output`. On any failure — the server's answer, the connection, a stream cut short — the
/// temporary file is removed and `output` is left as it was.
pub fn run_backup(args: &BackupArgs) -> Result<Verified, BoxError> {
    let uri = backup_uri(args)?;
    let name = args
        .output
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("--output {}: not a file name", args.output.display()))?;
    let dir = match args.output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let temp = dir.join(format!(".{name}.{}.partial", std::process::id()));
    let outcome = (|| -> Result<Verified, BoxError> {
        let file = std::fs::File::create(&temp)
            .map_err(|e| format!("cannot write {}: {e}", temp.display()))?;
        download(&uri, &args.key, &file)?;
        file.sync_all()?;
        drop(file);
        let verified = run_verify(&temp)
            .map_err(|e| format!("the backup the server sent is not whole: {e}"))?;
        std::fs::rename(&temp, &args.output)
            .map_err(|e| format!("cannot write {}: {e}", args.output.display()))?;
        std::fs::File::open(&dir)?.sync_all()?;
        Ok(verified)
    })();
    if outcome.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    outcome
}

/// `{server}/api/v1/backup?…` for the arguments.
fn backup_uri(args: &BackupArgs) -> Result<Uri, BoxError> {
    let server = &args.server;
    let mut target = url::Url::parse(server).map_err(|e| format!("--server {server}: {e}"))?;
    if target.scheme() != "http" {
        return Err(format!("--server {server}: only http:// is supported").into());
    }
    if target.host_str().is_none() {
        return Err("--server has no host".into());
    }
    let prefix = target.path().trim_end_matches('/').to_string();
    target.set_path(&format!("{prefix}/api/v1/backup"));
    target.set_fragment(None);
    {
        let mut query = target.query_pairs_mut();
        query.clear();
        query.append_pair("visits", &args.visits.to_string());
        query.append_pair("leads", &args.leads.to_string());
        query.append_pair("accounts", &args.accounts.to_string());
        if args.compress {
            query.append_pair("compress", "zstd");
        }
    }
    Ok(target
        .as_str()
        .parse()
        .map_err(|e| format!("--server {server}: {e}"))?)
}

/// Writes the answer's body to `file` as it arrives, with a progress bar; an error for a
/// non-2xx answer, a broken connection, or a server quiet for [`QUIET_LIMIT`].
fn download(uri: &Uri, key: &str, file: &std::fs::File) -> Result<(), BoxError> {
    let request = Request::get(uri.clone())
        .header(header::AUTHORIZATION, format!("Bearer {key}"))
        .body(Empty::<Bytes>::new())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut out = std::io::BufWriter::with_capacity(256 * 1024, file);
    runtime.block_on(async {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let response = tokio::time::timeout(QUIET_LIMIT, client.request(request))
            .await
            .map_err(|_| format!("{uri}: no answer within {} s", QUIET_LIMIT.as_secs()))?
            .map_err(|e| format!("{uri}: {}", chain(&e)))?;
        let status = response.status();
        let mut body = response.into_body();
        if !status.is_success() {
            let text = tokio::time::timeout(QUIET_LIMIT, body.collect())
                .await
                .ok()
                .and_then(Result::ok)
                .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
                .unwrap_or_default();
            return Err(format!("{uri}: {} {text}", status.as_u16()).into());
        }
        let mut progress = Progress::with_unit("backing up", "bytes");
        loop {
            let frame = tokio::time::timeout(QUIET_LIMIT, body.frame())
                .await
                .map_err(|_| {
                    format!(
                        "{uri}: the server sent nothing for {} s",
                        QUIET_LIMIT.as_secs()
                    )
                })?;
            match frame {
                None => break,
                Some(Err(e)) => {
                    return Err(format!("{uri}: the stream broke off: {}", chain(&e)).into())
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        out.write_all(&data)?;
                        progress.tick(data.len() as u64);
                    }
                }
            }
        }
        out.flush()?;
        progress.finish("downloaded; checking it");
        Ok::<(), BoxError>(())
    })
}

/// An error and its causes on one line (hyper's own message is only "client error (Connect)").
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// `vshortlink backup --verify FILE`: the whole file checked, without a store.
pub fn run_verify(path: &Path) -> Result<Verified, BoxError> {
    let (mut input, compressed) = open_backup(path)?;
    let verified = verify(&mut *input).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Verified {
        compressed,
        ..verified
    })
}

/// `vshortlink restore FILE`: checks the whole file first (nothing is written from a cut or
/// changed one), then imports it into the stopped store — which must have no link, unless
/// `force`, when the backup is merged as `import` merges (a code leading elsewhere is
/// refused, never overwritten).
pub fn run_restore(config: Config, path: &Path, force: bool) -> Result<ImportSummary, BoxError> {
    run_verify(path).map_err(|e| format!("{e}; nothing was restored"))?;
    let store = crate::open_store(&config)?;
    let counts = store.link_counts()?;
    let links = counts.active + counts.expired + counts.deleted + counts.archived;
    if links > 0 && !force {
        store.close()?;
        return Err(format!(
            "this store already has {links} links: restore goes into an empty store (stop the \
             server, point the configuration at an empty data directory or database), or \
             --force merges the backup into this one as import does; nothing was restored"
        )
        .into());
    }
    let (mut input, _) = open_backup(path)?;
    let options = ImportOptions {
        format: Format::Vsl,
        dry_run: false,
        url_column: None,
        code_column: None,
        // Into a store with no link, the backup's keys replace those its first start
        // generated (they decided no code yet), so that `hash` codes stay the same.
        replace_keys: links == 0,
    };
    let summary = import(
        store.clone(),
        Arc::new(config),
        &mut *input,
        &options,
        &mut std::io::stderr().lock(),
    );
    store.close()?;
    summary
}
