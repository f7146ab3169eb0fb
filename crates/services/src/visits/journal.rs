//! The visit journal: an append-only log of checksummed records in numbered segment files,
//! in `<storage.path>/journal/`. It owns the file format, appending (the redirect's side),
//! reading from a position (the writer's side, and the replay after a restart, which is the
//! same read), and removing segments once folded. It knows nothing of what a record holds
//! (the recorder's visits) nor of the store (the writer notes how far it folded, in the
//! store, in the same write as the visits).
//!
//! Format: a segment `<number:020>.vj` starts with [`MAGIC`]; then records, each
//! `length: u32 LE | crc32(payload): u32 LE | payload`. A redirect appends with one `write`
//! at the end it holds under a lock (it never reads, seeks or waits on the writer), so a
//! record in the file is whole once the call returns: in the page cache, which a killed
//! process does not take with it. A failed write is cut back off the file; if even that
//! fails, the segment is closed and the next record starts a new one. Opening never appends
//! to an existing segment: whatever a crash left at its end stays there, and the reader
//! skips a torn last record (with a log line) and goes on with the next segment.
//!
//! A position is (segment, offset), the byte after the last record taken; the reader reads
//! the segment being appended only up to the end the appender has published, so it never
//! sees a record being written.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

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
/// Bytes read from a segment at once.
const READ_CHUNK: usize = 4 << 20;

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
    /// `None` until the first append (and after a segment had to be given up).
    file: Option<File>,
    segment: u64,
    /// Where the next record goes.
    offset: u64,
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
    /// Records appended since the journal opened.
    appended: AtomicU64,
    /// Test builds only: while this file exists, appends fail as on a full disk.
    #[cfg(debug_assertions)]
    full_when: Option<PathBuf>,
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
            }),
            published: Mutex::new(Position {
                segment: next,
                offset: MAGIC.len() as u64,
            }),
            closed: Mutex::new(Vec::new()),
            created: AtomicBool::new(false),
            failing: AtomicBool::new(false),
            appended: AtomicU64::new(0),
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

    /// Records appended since the journal opened.
    pub fn appended(&self) -> u64 {
        self.appended.load(Ordering::Relaxed)
    }

    /// Appends one record: one `write` at the end of the current segment, under a lock held
    /// for that write alone. Returns the position after it. On an error nothing of the record
    /// stays in the journal (what was written is cut off again).
    pub fn append(&self, payload: &[u8]) -> io::Result<Position> {
        let result = self.append_locked(payload);
        self.failing.store(result.is_err(), Ordering::Relaxed);
        if result.is_ok() {
            self.appended.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    fn append_locked(&self, payload: &[u8]) -> io::Result<Position> {
        if payload.is_empty() || payload.len() > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a journal record is 1 to 64 KiB",
            ));
        }
        let mut record = Vec::with_capacity(RECORD_HEADER + payload.len());
        record.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        record.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        record.extend_from_slice(payload);
        let mut active = self.active.lock();
        #[cfg(debug_assertions)]
        if self.full_when.as_ref().is_some_and(|p| p.exists()) {
            return Err(io::Error::from_raw_os_error(28)); // ENOSPC
        }
        if active.file.is_some() && active.offset + record.len() as u64 > self.segment_bytes {
            self.close_active(&mut active);
        }
        if active.file.is_none() {
            self.begin_segment(&mut active)?;
        }
        let Some(file) = active.file.as_ref() else {
            return Err(io::Error::other("no journal segment"));
        };
        let at = active.offset;
        if let Err(e) = file.write_all_at(&record, at) {
            // Cut off whatever part went in, so the next record follows the last whole one;
            // if that fails too, give the segment up (the reader skips its torn end).
            if file.set_len(at).is_err() {
                self.close_active(&mut active);
            }
            return Err(e);
        }
        active.offset = at + record.len() as u64;
        let end = Position {
            segment: active.segment,
            offset: active.offset,
        };
        *self.published.lock() = end;
        Ok(end)
    }

    /// Closes the current segment; the next append begins the one after it.
    fn close_active(&self, active: &mut Active) {
        if let Some(file) = active.file.take() {
            self.closed.lock().push(file);
        }
        active.segment += 1;
        active.offset = MAGIC.len() as u64;
        *self.published.lock() = Position {
            segment: active.segment,
            offset: active.offset,
        };
    }

    /// Creates the current segment's file with its magic; a failure leaves no file.
    fn begin_segment(&self, active: &mut Active) -> io::Result<()> {
        let path = self.dir.join(segment_name(active.segment));
        let mut file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&path)?;
        if let Err(e) = file.write_all(MAGIC) {
            drop(file);
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        active.file = Some(file);
        active.offset = MAGIC.len() as u64;
        self.created.store(true, Ordering::Relaxed);
        Ok(())
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
            active.file.as_ref().map(File::try_clone).transpose()?
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
                        Parsed::Short | Parsed::Bad => {
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

enum Parsed<'a> {
    Record(&'a [u8]),
    /// The bytes end inside the record.
    Short,
    /// A length out of bounds or a checksum that does not match.
    Bad,
}

fn parse(bytes: &[u8]) -> Parsed<'_> {
    let Some(header) = bytes.get(..RECORD_HEADER) else {
        return Parsed::Short;
    };
    let (len, crc) = header.split_at(4);
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let crc = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
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
        let path = dir.path().join(segment_name(1));
        let len = std::fs::metadata(&path).expect("segment").len();
        let file = OpenOptions::new().write(true).open(&path).expect("open");
        file.set_len(len - 3).expect("cut");
        drop(file);
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
        assert!(matches!(parse(&[0u8; 16]), Parsed::Bad));
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
}
