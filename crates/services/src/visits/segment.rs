//! The visit journal's open segment, mapped into memory (`MAP_SHARED`): appending a record
//! is a copy into the file's pages in the page cache, with no system call and no wait. A
//! killed process does not take those pages with it (the kernel writes them back as it would
//! a `write`'s), so a redirect can answer as soon as its record is copied.
//!
//! The one place in this crate with `unsafe` (mapping a file is `unsafe` in Rust: the bytes
//! could change under the mapping, or the file be cut short, and touching a page past its end
//! is a fault). The file is one this process created (`create_new`) in its own data
//! directory and only ever appends to through this mapping; it is never cut while mapped, and
//! no byte of the mapping is read back through it (the journal's reader reads the file).
//! Pages past the file's end are never touched: the file is grown with `fallocate` before a
//! copy reaches them, which also makes a full disk an error here instead of a fault on a
//! page's first write.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use memmap2::{MmapMut, MmapOptions, UncheckedAdvice};

/// Bytes the file grows by at once: a `fallocate` every few thousand records.
const GROW_BYTES: u64 = 1 << 20;

/// A segment file being appended to, mapped for its whole capacity.
pub(super) struct MappedSegment {
    file: File,
    map: MmapMut,
    /// The file's length: what is allocated and may be written.
    allocated: u64,
    /// Everything below this was handed back to the page cache ([`Self::release_before`]).
    released: usize,
}

impl MappedSegment {
    /// Maps `file` (created empty by the caller) for up to `capacity` bytes.
    pub(super) fn new(file: File, capacity: u64) -> io::Result<MappedSegment> {
        let len = usize::try_from(capacity).map_err(io::Error::other)?;
        // SAFETY: see the module's documentation. The mapping is longer than the file (it
        // is empty yet); only bytes below `allocated`, the file's length, are ever written.
        let map = unsafe { MmapOptions::new().len(len).map_mut(&file)? };
        Ok(MappedSegment {
            file,
            map,
            allocated: 0,
            released: 0,
        })
    }

    /// Copies `bytes` to `at`, growing the file first when they reach past its end. On an
    /// error (a full disk) nothing was copied.
    pub(super) fn write_at(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        let end = at + bytes.len() as u64;
        let capacity = self.map.len() as u64;
        if end > capacity {
            return Err(io::Error::other("a journal record past its segment's end"));
        }
        if end > self.allocated {
            let grown = end
                .div_ceil(GROW_BYTES)
                .saturating_mul(GROW_BYTES)
                .min(capacity);
            self.grow(grown)?;
            self.release_before(at);
        }
        // Within the capacity (checked above), so within the mapping.
        self.map[at as usize..end as usize].copy_from_slice(bytes);
        Ok(())
    }

    /// Allocates the file's blocks up to `len` (and its length with them).
    fn grow(&mut self, len: u64) -> io::Result<()> {
        let from = self.allocated;
        match rustix::fs::fallocate(
            &self.file,
            rustix::fs::FallocateFlags::empty(),
            from,
            len - from,
        ) {
            Ok(()) => {}
            // A file system without `fallocate`: zeros written allocate the blocks as well.
            Err(rustix::io::Errno::OPNOTSUPP) => {
                let zeros = vec![0u8; usize::try_from(len - from).map_err(io::Error::other)?];
                if let Err(e) = self.file.write_all_at(&zeros, from) {
                    let _ = self.file.set_len(from);
                    return Err(e);
                }
            }
            Err(e) => return Err(e.into()),
        }
        self.allocated = len;
        Ok(())
    }

    /// Unmaps the written pages before `at` from this process (they stay in the page cache,
    /// dirty until written back), so that the mapping does not hold a whole segment in the
    /// process's resident memory.
    fn release_before(&mut self, at: u64) {
        let page = page_size();
        let upto = usize::try_from(at).unwrap_or(0) / page * page;
        if upto > self.released {
            // SAFETY: `DontNeed` on a shared file mapping drops this process's page table
            // entries only; the pages and their contents stay in the page cache (dirty pages
            // are written back as usual) and would be faulted in again from it. No reference
            // into the mapping is held across this call.
            let advised = unsafe {
                self.map.unchecked_advise_range(
                    UncheckedAdvice::DontNeed,
                    self.released,
                    upto - self.released,
                )
            };
            if advised.is_ok() {
                self.released = upto;
            }
        }
    }

    pub(super) fn file(&self) -> &File {
        &self.file
    }

    /// Unmaps the segment and cuts what was allocated past `len` (the records' end) off its
    /// file: a closed segment is exactly its records. Returns the file (to sync), and whether
    /// the cut was made (if not, the zeros after the records are read as the end).
    pub(super) fn close(self, len: u64) -> (File, io::Result<()>) {
        let MappedSegment { file, map, .. } = self;
        drop(map);
        let cut = file.set_len(len);
        (file, cut)
    }
}

fn page_size() -> usize {
    rustix::param::page_size()
}
