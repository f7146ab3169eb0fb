//! The visit journal: an append-only log of checksummed records in numbered segment files,
//! in `<storage.path>/journal/`. It owns the file format, appending (the redirect's side),
//! reading from a position (the writer's side, and the replay after a restart, which is the
//! same read), and removing segments once folded. It knows nothing of what a record holds
//! (the recorder's visits) nor of the store (the writer notes how far it folded, in the
//! store, in the same write as the visits).
//!
//! Format: a segment `<number:020>.vj` starts with [`MAGIC`]; then records, each
//! `length: u32 LE | crc32(payload): u32 LE | payload`. The segment being appended is mapped
//! into memory (`segment.rs`): a redirect's record is framed and copied to the end of it
//! under a lock held for that copy alone ([`Journal::append_with`]: no system call, no wait
//! on other redirects or on the visit writer), so the record is whole in the page cache, which
//! a killed process does not take with it, before its redirect answers. The file grows a
//! megabyte at a time with `fallocate`; a growth the disk refuses (full) refuses the record,
//! and nothing of it is in the file. A closed segment is cut to its records' end; one a crash
//! left open ends in zeros, which the reader takes as its end. Opening never appends to an
//! existing segment: whatever a crash left at its end stays there, and the reader skips a
//! torn last record (with a log line) and goes on with the next segment.
//!
//! A position is (segment, offset), the byte after the last record taken; the reader reads
//! the segment being appended only up to the end the appender has published, so it never
//! sees a record being written.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use super::segment::MappedSegment;

/// The first bytes of every segment.
pub const MAGIC: &[u8; 8] = b"VSLJRNL1";
/// Bytes before a record's payload: its length and its checksum.
pub const RECORD_HEADER: usize = 8;
/// Longest payload accepted; a length above it is a torn or corrupt record.
pub const MAX_PAYLOAD: usize = 64 * 1024;
/// Size at which a segment is closed and the next one begun. Folded segments are removed
/// whole, so a smaller segment gives space back sooner; at 200 bytes a visit this is about
/// 80,000 visits, a second or two of the heaviest traffic two cores serve.
pub const SEGMENT_BYTES: u64 = 16 << 20;
/// Bytes read from a segment at once. A read stops at the writer's batch (about 1.3 MB of
/// records at the default budget): with the journal behind, chunks of 4 MB were allocated,
/// zeroed and copied for every batch, three times what it took. A chunk holds the largest
/// record whole.
const READ_CHUNK: usize = 256 << 10;
const _: () = assert!(READ_CHUNK >= RECORD_HEADER + MAX_PAYLOAD);

/// Where the journal has been read (or folded) to: the byte after the last record taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    pub segment: u64,
    pub offset: u64,
}

impl Position {
    /// 16 bytes, as the store keeps them.
    pub fn encode(self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.segment.to_be_bytes());
        out[8..].copy_from_slice(&self.offset.to_be_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<Position> {
        let segment = u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?);
        let offset = u64::from_be_bytes(bytes.get(8..16)?.try_into().ok()?);
        Some(Position { segment, offset })
    }
}

/// The segment being appended to.
struct Active {
    /// `None` until the first append (and after a segment was closed).
    file: Option<MappedSegment>,
    segment: u64,
    /// Where the next record goes.
    offset: u64,
    /// The record being appended, framed (kept for its allocation).
    record: Vec<u8>,
}

/// The journal of one data directory.
pub struct Journal {
    dir: PathBuf,
    /// Names this journal in the store (its position), so that instances sharing a
    /// PostgreSQL database each keep their own.
    id: String,
    segment_bytes: u64,
    active: Mutex<Active>,
    /// The segment and end the reader may read up to (published after each append).
    published: Mutex<Position>,
    /// Segments closed since the last [`Journal::sync`] (`power` durability syncs them).
    closed: Mutex<Vec<File>>,
    /// A segment file was created since the last sync (its directory entry is synced too).
    created: AtomicBool,
    /// The last append failed (a full disk): `/healthz` says so until one succeeds.
    failing: AtomicBool,
    /// Test builds only: while this file exists, appends fail as on a full disk.
    #[cfg(debug_assertions)]
    full_when: Option<PathBuf>,
}

/// Frames at the end of `out` the payload `write` appends there: room for the header first,
/// filled in once the payload's length and checksum are known. A payload of the wrong size is
/// taken off again, so `out` is as it was.
fn frame_into(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) -> io::Result<()> {
    let start = out.len();
    out.extend_from_slice(&[0; RECORD_HEADER]);
    write(out);
    let payload = &out[start + RECORD_HEADER..];
    if payload.is_empty() || payload.len() > MAX_PAYLOAD {
        out.truncate(start);
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a journal record is 1 to 64 KiB",
        ));
    }
    let len = (payload.len() as u32).to_le_bytes();
    let crc = crc32fast::hash(payload).to_le_bytes();
    out[start..start + 4].copy_from_slice(&len);
    out[start + 4..start + RECORD_HEADER].copy_from_slice(&crc);
    Ok(())
}

/// What a torn or corrupt stretch was: where, and how many bytes were skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub at: Position,
    pub bytes: u64,
}

/// What [`Journal::read`] took.
#[derive(Debug, Default)]
pub struct Taken {
    /// Where the next read starts.
    pub next: Position,
    /// Records handed to the callback.
    pub records: usize,
    /// Torn or corrupt stretches skipped (each logged).
    pub skipped: Vec<Skipped>,
}

fn segment_name(segment: u64) -> String {
    format!("{segment:020}.vj")
}

fn segment_number(name: &str) -> Option<u64> {
    name.strip_suffix(".vj")?.parse().ok()
}

impl Journal {
    /// Opens (or creates) the journal in `dir`. Appends go to a new segment numbered after
    /// every existing one.
    pub fn open(dir: &Path) -> io::Result<Journal> {
        Self::open_with(dir, SEGMENT_BYTES)
    }

    /// [`Journal::open`] with another segment size (tests roll segments over quickly).
    pub fn open_with(dir: &Path, segment_bytes: u64) -> io::Result<Journal> {
        std::fs::create_dir_all(dir)?;
        let id_path = dir.join("id");
        let id = match std::fs::read_to_string(&id_path) {
            Ok(id) if !id.trim().is_empty() => id.trim().to_string(),
            Ok(_) => Self::new_id(&id_path)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Self::new_id(&id_path)?,
            Err(e) => return Err(e),
        };
        let last = Self::segments_in(dir)?.last().copied().unwrap_or(0);
        let next = last + 1;
        Ok(Journal {
            dir: dir.to_path_buf(),
            id,
            segment_bytes: segment_bytes.max((MAGIC.len() + RECORD_HEADER + MAX_PAYLOAD) as u64),
            active: Mutex::new(Active {
                file: None,
                segment: next,
                offset: MAGIC.len() as u64,
                record: Vec::new(),
            }),
            published: Mutex::new(Position {
                segment: next,
                offset: MAGIC.len() as u64,
            }),
            closed: Mutex::new(Vec::new()),
            created: AtomicBool::new(false),
            failing: AtomicBool::new(false),
            #[cfg(debug_assertions)]
            full_when: std::env::var_os("VSHORTLINK_TEST_JOURNAL_FULL").map(PathBuf::from),
        })
    }

    fn new_id(path: &Path) -> io::Result<String> {
        let id = hex::encode(rand::random::<[u8; 16]>());
        std::fs::write(path, &id)?;
        Ok(id)
    }

    /// The numbers of the segment files in `dir`, ascending.
    fn segments_in(dir: &Path) -> io::Result<Vec<u64>> {
        let mut numbers = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if let Some(n) = entry.file_name().to_str().and_then(segment_number) {
                numbers.push(n);
            }
        }
        numbers.sort_unstable();
        Ok(numbers)
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Did the last append fail (the disk is full)?
    pub fn failing(&self) -> bool {
        if !self.failing.load(Ordering::Relaxed) {
            return false;
        }
        // A failure is only known again at the next visit's write; when room has come back
        // meanwhile (a free megabyte on the journal's file system), the journal is taken as
        // writable again, so that `/healthz` recovers without waiting for a visit. The next
        // write says for certain.
        #[cfg(debug_assertions)]
        if self.full_when.as_ref().is_some_and(|p| p.exists()) {
            return true;
        }
        let room = rustix::fs::statvfs(&self.dir)
            .map(|s| s.f_bavail.saturating_mul(s.f_frsize))
            .unwrap_or(0);
        if room >= 1 << 20 {
            self.failing.store(false, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Is the last append known to have failed? (No system call, unlike [`Journal::failing`].)
    pub fn refusing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
    }

    /// Appends one record: `payload`, framed, at the end of the current segment (beginning
    /// the next one when it does not fit). Returns the position after it. On an error nothing
    /// of the record is in the journal.
    pub fn append(&self, payload: &[u8]) -> io::Result<Position> {
        self.append_with(|out| out.extend_from_slice(payload))
    }

    /// [`Journal::append`] of the payload `write` appends to a buffer (the redirect encodes
    /// its visit there: no allocation of its own). `write` runs under the appenders' lock: it
    /// only copies bytes it was given. Refuses a payload of the wrong size, and any record
    /// while the disk refuses the segment room (the journal is then failing).
    pub fn append_with(&self, write: impl FnOnce(&mut Vec<u8>)) -> io::Result<Position> {
        let mut active = self.active.lock();
        let active = &mut *active;
        active.record.clear();
        frame_into(&mut active.record, write)?;
        let result = self.put(active);
        self.failing.store(result.is_err(), Ordering::Relaxed);
        result
    }

    /// Copies the framed record into the current segment and publishes the end after it.
    fn put(&self, active: &mut Active) -> io::Result<Position> {
        #[cfg(debug_assertions)]
        if self.full_when.as_ref().is_some_and(|p| p.exists()) {
            return Err(io::Error::from_raw_os_error(28)); // ENOSPC
        }
        let len = active.record.len() as u64;
        if active.file.is_some() && active.offset + len > self.segment_bytes {
            self.close_active(active);
        }
        if active.file.is_none() {
            self.begin_segment(active)?;
        }
        let Some(file) = active.file.as_mut() else {
            return Err(io::Error::other("no journal segment"));
        };
        file.write_at(active.offset, &active.record)?;
        active.offset += len;
        let end = Position {
            segment: active.segment,
            offset: active.offset,
        };
        *self.published.lock() = end;
        Ok(end)
    }

    /// Closes the current segment (cut to its records); the next append begins the one
    /// after it.
    fn close_active(&self, active: &mut Active) {
        if let Some(file) = active.file.take() {
            let (file, cut) = file.close(active.offset);
            if let Err(e) = cut {
                // Its end stays zeros, which the reader takes as the end.
                tracing::warn!(
                    segment = active.segment,
                    error = %e,
                    "visit journal: a closed segment could not be cut to its records"
                );
            }
            self.closed.lock().push(file);
        }
        active.segment += 1;
        active.offset = MAGIC.len() as u64;
        *self.published.lock() = Position {
            segment: active.segment,
            offset: active.offset,
        };
    }

    /// Creates the current segment's file, mapped, with its magic; a failure leaves no file.
    fn begin_segment(&self, active: &mut Active) -> io::Result<()> {
        let path = self.dir.join(segment_name(active.segment));
        let file = OpenOptions::new()
            .create_new(true)
            .read(true)
            .write(true)
            .open(&path)?;
        let begun = MappedSegment::new(file, self.segment_bytes).and_then(|mut file| {
            file.write_at(0, MAGIC)?;
            Ok(file)
        });
        match begun {
            Ok(file) => {
                active.file = Some(file);
                active.offset = MAGIC.len() as u64;
                self.created.store(true, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        }
    }

    /// Where the reader may read up to.
    pub fn end(&self) -> Position {
        *self.published.lock()
    }

    /// `fdatasync`s what was appended (and closed segments, and the directory when a segment
    /// was created): `storage.durability = "power"`.
    pub fn sync(&self) -> io::Result<()> {
        let file = {
            let active = self.active.lock();
            active
                .file
                .as_ref()
                .map(|f| f.file().try_clone())
                .transpose()?
        };
        let closed = std::mem::take(&mut *self.closed.lock());
        for file in closed.iter().chain(file.as_ref()) {
            file.sync_data()?;
        }
        if self.created.swap(false, Ordering::Relaxed) {
            File::open(&self.dir)?.sync_all()?;
        }
        Ok(())
    }

    /// Reads records from `from` on, at most `max_records`, handing each payload to `take`.
    /// A torn or corrupt record ends its segment: the rest of that segment is skipped and
    /// logged, and reading goes on with the next one. The segment being appended is read up
    /// to its published end only.
    pub fn read(
        &self,
        from: Position,
        max_records: usize,
        mut take: impl FnMut(&[u8]),
    ) -> io::Result<Taken> {
        let end = self.end();
        let mut read = Taken {
            next: from,
            ..Taken::default()
        };
        let segments = Self::segments_in(&self.dir)?;
        let mut pos = from;
        // Past the folded position, start at the first segment that exists.
        match segments.iter().find(|&&n| n >= pos.segment) {
            Some(&n) if n != pos.segment => {
                pos = Position {
                    segment: n,
                    offset: MAGIC.len() as u64,
                }
            }
            Some(_) => pos.offset = pos.offset.max(MAGIC.len() as u64),
            None => {
                // Nothing to read yet; the next segment appended is `end.segment`.
                if end.segment > pos.segment && pos.segment != 0 {
                    read.next = Position {
                        segment: end.segment,
                        offset: MAGIC.len() as u64,
                    };
                }
                return Ok(read);
            }
        }
        read.next = pos;
        let mut buf = Vec::new();
        let first = pos.segment;
        for &segment in segments.iter().filter(|&&n| n >= first) {
            if segment > end.segment {
                break;
            }
            if segment != pos.segment {
                pos = Position {
                    segment,
                    offset: MAGIC.len() as u64,
                };
                read.next = pos;
            }
            let sealed = segment < end.segment;
            let mut file = match File::open(self.dir.join(segment_name(segment))) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let limit = if sealed {
                file.metadata()?.len()
            } else {
                end.offset
            };
            let mut magic = [0u8; 8];
            if file.read_exact(&mut magic).is_err() || &magic != MAGIC {
                let skipped = Skipped {
                    at: pos,
                    bytes: limit,
                };
                self.log_skip(&skipped, "not a journal segment");
                read.skipped.push(skipped);
                pos.offset = limit;
                read.next = pos;
                continue;
            }
            // Records of this segment, a chunk at a time.
            'chunks: while pos.offset < limit {
                if read.records >= max_records {
                    return Ok(read);
                }
                let want = usize::try_from(limit - pos.offset)
                    .unwrap_or(usize::MAX)
                    .min(READ_CHUNK);
                buf.resize(want, 0);
                file.seek(SeekFrom::Start(pos.offset))?;
                file.read_exact(&mut buf)?;
                let mut at = 0usize;
                loop {
                    if read.records >= max_records {
                        return Ok(read);
                    }
                    let rest = &buf[at..];
                    if rest.is_empty() {
                        break;
                    }
                    let record = match parse(rest) {
                        Parsed::Record(payload) => payload,
                        Parsed::Short if want == READ_CHUNK && at > 0 => {
                            // Cut by the chunk, not torn: read on from this record.
                            continue 'chunks;
                        }
                        // What a crash left of the room the segment was growing into.
                        Parsed::End if sealed => {
                            pos.offset = limit;
                            read.next = pos;
                            break 'chunks;
                        }
                        Parsed::Short | Parsed::Bad | Parsed::End => {
                            let skipped = Skipped {
                                at: pos,
                                bytes: limit - pos.offset,
                            };
                            if !sealed {
                                // Only published records are read here, so this is damage
                                // in the file itself: wait for the segment to be closed.
                                self.log_skip(&skipped, "unreadable record in the open segment");
                                return Ok(read);
                            }
                            self.log_skip(&skipped, "torn or corrupt record");
                            read.skipped.push(skipped);
                            pos.offset = limit;
                            read.next = pos;
                            break 'chunks;
                        }
                    };
                    take(record);
                    let size = RECORD_HEADER + record.len();
                    at += size;
                    pos.offset += size as u64;
                    read.records += 1;
                    read.next = pos;
                }
            }
        }
        // Reached the end of a closed segment with nothing after it yet: the next read
        // starts where the appender's next segment will.
        if read.next.segment < end.segment
            && read.next.offset >= self.segment_len(read.next.segment)
        {
            read.next = Position {
                segment: end.segment,
                offset: MAGIC.len() as u64,
            };
        }
        Ok(read)
    }

    fn segment_len(&self, segment: u64) -> u64 {
        std::fs::metadata(self.dir.join(segment_name(segment))).map_or(0, |m| m.len())
    }

    fn log_skip(&self, skipped: &Skipped, what: &str) {
        tracing::warn!(
            segment = skipped.at.segment,
            offset = skipped.at.offset,
            bytes = skipped.bytes,
            "visit journal: {what} skipped; the records before it and every later segment are \
             folded"
        );
    }

    /// Removes the segments wholly before `position` (folded into the store).
    pub fn remove_before(&self, position: Position) -> io::Result<u64> {
        let mut removed = 0;
        for segment in Self::segments_in(&self.dir)? {
            if segment >= position.segment {
                break;
            }
            match std::fs::remove_file(self.dir.join(segment_name(segment))) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(removed)
    }

    /// Bytes of the segment files on disk.
    pub fn bytes(&self) -> io::Result<u64> {
        let mut total = 0;
        for segment in Self::segments_in(&self.dir)? {
            total += self.segment_len(segment);
        }
        Ok(total)
    }
}

impl Drop for Journal {
    /// A clean stop cuts the open segment to its records.
    fn drop(&mut self) {
        let active = self.active.get_mut();
        if let Some(file) = active.file.take() {
            let _ = file.close(active.offset).1;
        }
    }
}

enum Parsed<'a> {
    Record(&'a [u8]),
    /// The bytes end inside the record.
    Short,
    /// A length out of bounds or a checksum that does not match.
    Bad,
    /// Zeros to the end of the bytes: room allocated and never written (a segment a crash
    /// left open).
    End,
}

fn parse(bytes: &[u8]) -> Parsed<'_> {
    let Some(header) = bytes.get(..RECORD_HEADER) else {
        return Parsed::Short;
    };
    let (len, crc) = header.split_at(4);
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let crc = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if len == 0 && crc == 0 && bytes.iter().all(|&b| b == 0) {
        return Parsed::End;
    }
    if len == 0 || len > MAX_PAYLOAD {
        return Parsed::Bad;
    }
    let Some(payload) = bytes.get(RECORD_HEADER..RECORD_HEADER + len) else {
        return Parsed::Short;
    };
    if crc32fast::hash(payload) != crc {
        return Parsed::Bad;
    }
    Parsed::Record(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cuts the last `bytes` of the first segment, as a crash in the middle of its last
    /// record would leave it.
    fn cut_tail(dir: &Path, bytes: u64) {
        let path = dir.join(segment_name(1));
        let len = std::fs::metadata(&path).expect("segment").len();
        let file = OpenOptions::new().write(true).open(&path).expect("open");
        file.set_len(len - bytes).expect("cut");
    }

    fn all(journal: &Journal, from: Position) -> (Vec<Vec<u8>>, Taken) {
        let mut out = Vec::new();
        let read = journal
            .read(from, usize::MAX, |p| out.push(p.to_vec()))
            .expect("read");
        (out, read)
    }

    fn payload(n: u32) -> Vec<u8> {
        format!("visit number {n} {}", "x".repeat((n % 50) as usize)).into_bytes()
    }

    #[test]
    fn records_come_back_in_order_and_positions_resume() {
        let dir = tempfile::tempdir().expect("dir");
        let journal = Journal::open(dir.path()).expect("open");
        let mut ends = Vec::new();
        for n in 0..100 {
            ends.push(journal.append(&payload(n)).expect("append"));
        }
        let (records, read) = all(&journal, Position::default());
        assert_eq!(records.len(), 100);
        assert_eq!(records[42], payload(42));
        assert_eq!(read.next, ends[99]);
        // From a position in the middle: the records after it, once.
        let (rest, _) = all(&journal, ends[59]);
        assert_eq!(rest.len(), 40);
        assert_eq!(rest[0], payload(60));
        // A bounded read stops at the bound and says where to go on.
        let mut some = Vec::new();
        let read = journal
            .read(Position::default(), 10, |p| some.push(p.to_vec()))
            .expect("read");
        assert_eq!((some.len(), read.next), (10, ends[9]));
        assert_eq!(Position::decode(&ends[9].encode()), Some(ends[9]));
    }

    #[test]
    fn segments_roll_over_and_folded_ones_are_removed() {
        let dir = tempfile::tempdir().expect("dir");
        // The smallest size allowed: a segment holds what the largest record needs.
        let journal = Journal::open_with(dir.path(), 1).expect("open");
        let big = vec![7u8; MAX_PAYLOAD];
        let mut ends = Vec::new();
        for _ in 0..3 {
            ends.push(journal.append(&big).expect("append"));
        }
        assert_eq!(
            ends.iter().map(|p| p.segment).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        let (records, read) = all(&journal, Position::default());
        assert_eq!(records.len(), 3);
        assert_eq!(read.next, ends[2]);
        // Folded through the second record: the first segment goes, the rest stays.
        assert_eq!(journal.remove_before(ends[1]).expect("remove"), 1);
        let (rest, _) = all(&journal, ends[1]);
        assert_eq!(rest.len(), 1);
        assert!(journal.bytes().expect("bytes") > 2 * MAX_PAYLOAD as u64);
    }

    #[test]
    fn a_torn_last_record_is_skipped_and_the_rest_read() {
        let dir = tempfile::tempdir().expect("dir");
        {
            let journal = Journal::open(dir.path()).expect("open");
            for n in 0..10 {
                journal.append(&payload(n)).expect("append");
            }
        }
        // A crash in the middle of the last record: cut its last bytes.
        cut_tail(dir.path(), 3);
        // Reopened, the journal appends to a new segment; the torn record is skipped.
        let journal = Journal::open(dir.path()).expect("reopen");
        let after = journal.append(&payload(99)).expect("append");
        assert_eq!(after.segment, 2);
        let (records, read) = all(&journal, Position::default());
        assert_eq!(
            records.len(),
            10,
            "nine whole records, then the next segment's"
        );
        assert_eq!(records[8], payload(8));
        assert_eq!(records[9], payload(99));
        assert_eq!(read.skipped.len(), 1);
        assert_eq!(read.skipped[0].at.segment, 1);
        assert_eq!(read.next, after);
    }

    /// Records cut by a read's chunk are read on from where they start; a torn last record
    /// several chunks in is still skipped.
    #[test]
    fn records_across_chunks_come_back_whole() {
        let dir = tempfile::tempdir().expect("dir");
        // From 1 to 60,000 bytes, so that records straddle every chunk boundary.
        let record = |n: u32| vec![(n % 251) as u8; 1 + (n as usize * 7_919) % 60_000];
        let count = 40;
        let mut total = 0;
        {
            let journal = Journal::open(dir.path()).expect("open");
            for n in 0..count {
                total += RECORD_HEADER + record(n).len();
                journal.append(&record(n)).expect("append");
            }
            assert!(total > 4 * READ_CHUNK, "{total} bytes");
            let (records, _) = all(&journal, Position::default());
            assert_eq!(records.len(), count as usize);
            assert!(records
                .iter()
                .enumerate()
                .all(|(n, r)| *r == record(n as u32)));
            // Bounded reads resume where the last stopped, across chunks.
            let (mut from, mut back) = (Position::default(), Vec::new());
            loop {
                let read = journal
                    .read(from, 3, |p| back.push(p.to_vec()))
                    .expect("read");
                if read.records == 0 {
                    break;
                }
                from = read.next;
            }
            assert_eq!(back, records);
        }
        cut_tail(dir.path(), 5);
        let journal = Journal::open(dir.path()).expect("reopen");
        let (records, read) = all(&journal, Position::default());
        assert_eq!(
            records.len(),
            count as usize - 1,
            "the torn last one skipped"
        );
        assert_eq!(read.skipped.len(), 1);
    }

    #[test]
    fn a_flipped_byte_fails_the_checksum() {
        let dir = tempfile::tempdir().expect("dir");
        {
            let journal = Journal::open(dir.path()).expect("open");
            for n in 0..5 {
                journal.append(&payload(n)).expect("append");
            }
        }
        let path = dir.path().join(segment_name(1));
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 2;
        bytes[last] ^= 0xff;
        std::fs::write(&path, bytes).expect("write");
        let journal = Journal::open(dir.path()).expect("reopen");
        let (records, read) = all(&journal, Position::default());
        assert_eq!(records.len(), 4);
        assert_eq!(read.skipped.len(), 1);
        assert!(matches!(parse(&[0u8; 16]), Parsed::End));
        assert!(matches!(parse(&[0, 0, 0, 0, 0, 0, 0, 0, 1]), Parsed::Bad));
        assert!(matches!(parse(&[5, 0, 0, 0]), Parsed::Short));
    }

    #[test]
    fn reading_past_a_closed_segment_moves_to_the_next_one() {
        let dir = tempfile::tempdir().expect("dir");
        {
            let journal = Journal::open(dir.path()).expect("open");
            journal.append(&payload(1)).expect("append");
        }
        let journal = Journal::open(dir.path()).expect("reopen");
        let (records, read) = all(&journal, Position::default());
        assert_eq!(records.len(), 1);
        // Nothing appended yet this time: the next read starts at the next segment.
        assert_eq!(
            read.next,
            Position {
                segment: 2,
                offset: MAGIC.len() as u64
            }
        );
        journal.append(&payload(2)).expect("append");
        let (records, _) = all(&journal, read.next);
        assert_eq!(records, vec![payload(2)]);
        assert_eq!(journal.remove_before(read.next).expect("remove"), 1);
        assert_eq!(journal.id().len(), 32);
    }

    /// Redirects on several threads at once: every record is in the journal once, whole, and
    /// segments roll over at record boundaries.
    #[test]
    fn appends_from_many_threads_take_every_record_once() {
        let dir = tempfile::tempdir().expect("dir");
        // The smallest segments (a 64 KiB record's): about 1,400 of these records each.
        let journal = Journal::open_with(dir.path(), 1).expect("open");
        std::thread::scope(|scope| {
            for thread in 0..8u32 {
                let journal = &journal;
                scope.spawn(move || {
                    for n in 0..400 {
                        journal.append(&payload(thread * 1000 + n)).expect("append");
                    }
                });
            }
        });
        let (records, read) = all(&journal, Position::default());
        assert_eq!(records.len(), 3200);
        assert!(read.skipped.is_empty());
        let mut seen: Vec<Vec<u8>> = records;
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 3200, "no record twice");
        assert!(journal.end().segment > 2, "segments rolled over");
    }

    /// A refused append (the disk full) leaves nothing of its record and the journal failing;
    /// the next one goes in once there is room again.
    #[test]
    fn a_refused_append_leaves_nothing_and_the_next_goes_in() {
        let dir = tempfile::tempdir().expect("dir");
        let mut journal = Journal::open(dir.path()).expect("open");
        journal.append(&payload(1)).expect("append");
        let full = dir.path().join("full");
        std::fs::write(&full, b"").expect("flag");
        journal.full_when = Some(full.clone());
        assert!(journal.append(&payload(2)).is_err());
        assert!(journal.refusing() && journal.failing());
        std::fs::remove_file(&full).expect("unflag");
        journal.append(&payload(3)).expect("append");
        assert!(!journal.refusing());
        let (records, _) = all(&journal, Position::default());
        assert_eq!(records, vec![payload(1), payload(3)]);
    }

    /// A payload of the wrong size is refused; the records around it are read back whole and
    /// nothing of it.
    #[test]
    fn a_payload_of_the_wrong_size_is_refused_whole() {
        let dir = tempfile::tempdir().expect("dir");
        let journal = Journal::open(dir.path()).expect("open");
        journal.append(&payload(1)).expect("append");
        let empty = journal.append_with(|_| {});
        assert_eq!(
            empty.map(drop).map_err(|e| e.kind()),
            Err(io::ErrorKind::InvalidInput)
        );
        let too_long = journal.append_with(|out| out.resize(out.len() + MAX_PAYLOAD + 1, 7));
        assert!(too_long.is_err());
        journal
            .append_with(|out| out.extend_from_slice(&payload(2)))
            .expect("append");
        let (records, _) = all(&journal, Position::default());
        assert_eq!(records, vec![payload(1), payload(2)]);
    }

    /// A process killed with its segment open leaves the room the segment grew into as zeros
    /// after the last record: the reader takes them as the segment's end (nothing skipped, no
    /// log line) and goes on with the next segment. A closed segment is cut to its records.
    #[test]
    fn an_open_segment_left_by_a_crash_ends_at_its_last_record() {
        let dir = tempfile::tempdir().expect("dir");
        {
            let journal = Journal::open(dir.path()).expect("open");
            for n in 0..3 {
                journal.append(&payload(n)).expect("append");
            }
            // A crash: the segment is neither unmapped nor cut.
            std::mem::forget(journal);
        }
        let first = dir.path().join(segment_name(1));
        assert_eq!(std::fs::metadata(&first).expect("segment").len(), 1 << 20);
        let journal = Journal::open(dir.path()).expect("reopen");
        journal.append(&payload(3)).expect("append");
        let (records, read) = all(&journal, Position::default());
        assert_eq!(records, (0..4).map(payload).collect::<Vec<_>>());
        assert!(read.skipped.is_empty());
        let end = journal.end();
        drop(journal);
        assert_eq!(
            std::fs::metadata(dir.path().join(segment_name(2)))
                .expect("segment")
                .len(),
            end.offset,
            "closed at a clean stop, cut to its records"
        );
    }
}
