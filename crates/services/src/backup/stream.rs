//! A backup as bytes: the sections' lines, then the `end` line (their count and SHA-256, over
//! the lines as written, before any compression), optionally zstd-compressed; and the bounded
//! stream of chunks the HTTP API sends, produced on a thread of its own so that reading the
//! store never holds an async worker, only as fast as the client takes them, and paced so that
//! redirects and creates keep their CPU (`Paced`).

use std::io::{self, BufWriter, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use super::records::{EndRecord, Record};
use super::sections::{write_sections, BackupOptions, Counts};
use crate::store::Store;
use crate::BoxError;

/// zstd's level: 3 (its default) compresses a backup's JSON about eightfold at hundreds of
/// MB/s, well ahead of the store's reading.
const ZSTD_LEVEL: i32 = 3;
/// Bytes per chunk handed to the HTTP body.
const CHUNK: usize = 64 * 1024;
/// A backup rests this many times as long as it worked: it takes at most a third of a core,
/// however long it runs, and runs at full speed between rests (at 1, half a core, redirects
/// and creates kept 0.78 and 0.79 of idle while backups streamed; benches/RESULTS.md). Not a lower thread priority:
/// a low-priority thread descheduled while it holds sled's read lock makes every create (a
/// transaction, which waits for that lock) wait for the thread the kernel runs last
/// (benches/RESULTS.md, "Backups while running": creates kept 0.44 of their idle rate at
/// nice 10).
const REST_PER_WORK: u32 = 2;
/// Work between rests: long enough that a rest is one sleep per few pages of records, short
/// enough that a create never waits behind more than this.
const WORK_SLICE: Duration = Duration::from_millis(5);
/// Chunks waiting for a slow client: with [`CHUNK`], at most 256 KiB per backup in flight
/// beyond the writer's own buffers (one page of records, zstd's window), whatever the store's
/// size.
const CHUNKS_IN_FLIGHT: usize = 4;

/// One piece of the stream: bytes, or the error that cut it short (the response then ends
/// without its last chunk, so the client sees a broken transfer, never a short file that
/// looks whole).
pub type Chunk = Result<Vec<u8>, io::Error>;

/// Hashes and counts what passes through it, and writes the `end` line on [`Sealing::seal`].
struct Sealing<W: Write> {
    inner: W,
    sha: Sha256,
    lines: u64,
}

impl<W: Write> Write for Sealing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write_all(buf)?;
        self.sha.update(buf);
        // serde_json escapes a newline inside a string, so every newline ends a line.
        self.lines += buf.iter().filter(|&&b| b == b'\n').count() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> Sealing<W> {
    fn seal(mut self) -> Result<W, BoxError> {
        let end = Record::End(EndRecord {
            records: self.lines,
            sha256: hex::encode(self.sha.finalize()),
        });
        let mut line = serde_json::to_vec(&end)?;
        line.push(b'\n');
        self.inner.write_all(&line)?;
        self.inner.flush()?;
        Ok(self.inner)
    }
}

/// Writes a whole backup to `out`: the sections `options` ask for, the `end` line, zstd
/// around it all when `compress`. `tick` hears of every record (a progress bar).
pub fn write_backup(
    store: &dyn Store,
    options: BackupOptions,
    out: impl Write,
    compress: bool,
    tick: &mut dyn FnMut(&Counts),
) -> Result<Counts, BoxError> {
    if compress {
        let encoder = zstd::Encoder::new(out, ZSTD_LEVEL)?;
        let (counts, encoder) = sealed(store, options, encoder, tick)?;
        encoder.finish()?.flush()?;
        Ok(counts)
    } else {
        let (counts, mut out) = sealed(store, options, out, tick)?;
        out.flush()?;
        Ok(counts)
    }
}

fn sealed<W: Write>(
    store: &dyn Store,
    options: BackupOptions,
    out: W,
    tick: &mut dyn FnMut(&Counts),
) -> Result<(Counts, W), BoxError> {
    // Buffered before the pacing and the hash: serde_json writes a record in many small
    // pieces, and both are paid per write.
    let mut lines = BufWriter::with_capacity(
        CHUNK,
        Paced {
            inner: Sealing {
                inner: out,
                sha: Sha256::new(),
                lines: 0,
            },
            mark: Instant::now(),
            worked: Duration::ZERO,
        },
    );
    let counts = write_sections(store, options, &mut lines, tick)?;
    let paced = lines.into_inner().map_err(|e| e.into_error())?;
    Ok((counts, paced.inner.seal()?))
}

/// Rests the writing thread [`REST_PER_WORK`] times as long as it read and encoded records,
/// once per [`WORK_SLICE`]. It sees a write per [`CHUNK`] of lines, and writes come between
/// store reads, so a rest never holds a store lock; the time spent inside the inner writer (waiting for a slow client) is not counted as
/// work, so a slow reader does not slow the backup twice.
struct Paced<W: Write> {
    inner: W,
    mark: Instant,
    worked: Duration,
}

impl<W: Write> Write for Paced<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.worked += self.mark.elapsed();
        if self.worked >= WORK_SLICE {
            std::thread::sleep(self.worked * REST_PER_WORK);
            self.worked = Duration::ZERO;
        }
        let n = self.inner.write(buf)?;
        self.mark = Instant::now();
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Hands full chunks to the channel, waiting while it is full: the client's pace.
struct ToChannel {
    tx: mpsc::Sender<Chunk>,
    buf: Vec<u8>,
}

impl ToChannel {
    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl Write for ToChannel {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(buf);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

/// Runs `work` on a new thread and hands its result back. A thread of its own, not tokio's
/// blocking pool: a backup runs for minutes, and the pool's threads are for short blocking
/// calls.
pub fn in_background<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> io::Result<tokio::sync::oneshot::Receiver<T>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("vsl-backup".into())
        .spawn(move || {
            let _ = tx.send(work());
        })?;
    Ok(rx)
}

/// Starts writing a backup on a thread of its own and returns its chunks. A client that stops
/// reading stops the writer within `CHUNKS_IN_FLIGHT` chunks; one that goes away ends it.
pub fn spawn(
    store: Arc<dyn Store>,
    options: BackupOptions,
    compress: bool,
) -> mpsc::Receiver<Chunk> {
    let (tx, rx) = mpsc::channel(CHUNKS_IN_FLIGHT);
    let failed = tx.clone();
    let started = in_background(move || {
        let out = ToChannel {
            tx: tx.clone(),
            buf: Vec::with_capacity(CHUNK),
        };
        let started = std::time::Instant::now();
        match write_backup(&*store, options, out, compress, &mut |_| {}) {
            Ok(counts) => tracing::info!(
                links = counts.links,
                visits = counts.visits,
                leads = counts.leads,
                took_ms = started.elapsed().as_millis() as u64,
                "backup streamed"
            ),
            Err(e) => {
                let kind = e
                    .downcast_ref::<io::Error>()
                    .map(io::Error::kind)
                    .or_else(|| {
                        e.downcast_ref::<serde_json::Error>()
                            .and_then(serde_json::Error::io_error_kind)
                    });
                let gone = kind == Some(io::ErrorKind::BrokenPipe);
                if gone {
                    tracing::info!("backup stream ended: the client went away");
                } else {
                    tracing::error!(error = %e, "backup stream failed");
                    let _ = tx.blocking_send(Err(io::Error::other(e.to_string())));
                }
            }
        }
    });
    if let Err(e) = started {
        tracing::error!(error = %e, "backup stream: cannot start its thread");
        let _ = failed.try_send(Err(e));
    }
    rx
}
