//! The byte formats the sled readers and writers share, below all of them (so that no two
//! of them import each other): the keys of per-link records, the fast map the visit writer
//! keys by strings and ids, the visit block ([`Block`], a `visit_blocks` value), and a link's
//! day record ([`DayRecord`], a `visit_days` value) with the counts not yet added to one
//! ([`DayDelta`], held by `visit_counts.rs`). Pure; owns no tree: the visit trees are
//! described in `visits/mod.rs`.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::hll::Hll;
use crate::model::tally::top_values;
use crate::model::time::{DAY_MS, HOUR_MS};
use crate::{Millis, NewVisit, StoreError, StoreResult, Visit};

/// The writer's maps are keyed by strings of one block and ids of one write: a fast seeded
/// hash (SipHash on every user agent of every visit was 3 % of a hot redirect profile).
pub(super) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The bytes of a [`FastMap`]'s table: its slots (`slot` bytes each, the control byte
/// included) at its capacity, which is at most 7/8 of them. The memory bounds of what the
/// visit writer holds count a map this way: a table keeps its size however few entries are
/// left in it, and doubles as it grows.
pub(super) fn table_bytes<K, V>(map: &FastMap<K, V>, slot: usize) -> usize {
    map.capacity() * 8 / 7 * slot
}

/// The key of a per-link record: link id, then a number (a block, a day), big-endian.
pub(super) fn link_key(link_id: u64, n: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&link_id.to_be_bytes());
    key[8..].copy_from_slice(&n.to_be_bytes());
    key
}

/// One link's counters of one UTC day.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct DayRecord {
    /// (hour of the day, visits, bots), by hour.
    pub(super) hours: Vec<(u8, u64, u64)>,
    /// (dimension, value, visits): the material of the `top` lists.
    pub(super) dims: Vec<(u8, String, u64)>,
    /// Distinct non-bot clients ([`Hll`] bytes).
    pub(super) uniques: Vec<u8>,
    /// The link's visits and bots of all time up to and including this day: the link's totals
    /// are its last record's, one read. `None` in records written before totals moved here
    /// (they were kept in `visit_totals`, which is still read for such links).
    #[serde(default)]
    pub(super) totals: Option<(u64, u64)>,
    /// The last visit block whose visits of this link and day are counted here (0 in records
    /// written before counts were held in memory): after a fold cut short by a crash, the
    /// blocks this covers are not counted again ([`super::visit_counts`]).
    #[serde(default)]
    pub(super) through: u64,
}

/// Decodes a day record (for [`super::check_record`]).
pub(super) fn decode_day(bytes: &[u8]) -> StoreResult<()> {
    let day: DayRecord = rmp_serde::from_slice(bytes).map_err(|e| corrupt("days", e))?;
    if !day.uniques.is_empty() && Hll::from_bytes(&day.uniques).is_none() {
        return Err(corrupt("days", "malformed distinct-visitor sketch"));
    }
    Ok(())
}

/// A stored day record for the fold or the rebuild. A damaged record restarts rather than
/// failing every later write, but loudly: its counts are lost.
pub(super) fn decode_day_record(link_id: u64, day: u64, bytes: &[u8]) -> DayRecord {
    rmp_serde::from_slice(bytes).unwrap_or_else(|e| {
        tracing::error!(
            link_id,
            day,
            error = %e,
            "corrupt visit day record: its counts restart from zero"
        );
        DayRecord::default()
    })
}

impl DayRecord {
    fn add_dim(&mut self, dim: u8, value: &str, n: u64) {
        match self.dims.iter_mut().find(|d| d.0 == dim && d.1 == value) {
            Some(d) => d.2 += n,
            None => self.dims.push((dim, value.to_string(), n)),
        }
    }

    /// Adds a call's counts to this stored record.
    pub(super) fn merge(&mut self, delta: &DayDelta) {
        for &(hour, visits, bots) in &delta.hours {
            add_hour(&mut self.hours, hour, visits, bots);
        }
        for (dim, value, n) in &delta.dims {
            self.add_dim(*dim, value, *n);
        }
    }
}

/// One link's counts of one day not yet added to its stored [`DayRecord`] (held in memory
/// until the next fold, [`super::visit_counts`]). It holds the visits' shared strings, so
/// gathering allocates nothing per visit beyond the first of a (link, day).
#[derive(Debug, Default)]
pub(super) struct DayDelta {
    /// (hour of the day, visits, bots), by hour.
    pub hours: Vec<(u8, u64, u64)>,
    /// (dimension, value, visits).
    pub dims: Vec<(u8, Arc<str>, u64)>,
    /// The distinct non-bot clients.
    pub uniques: Hll,
}

impl DayDelta {
    pub(super) fn add(&mut self, new: &NewVisit) {
        let v = &new.visit;
        let hour = ((v.at % DAY_MS) / HOUR_MS) as u8;
        let values = top_values(new).map(|(dim, value)| (dim.stored(), value));
        self.add_one(hour, v.is_bot, new.client_hash, values);
    }

    /// Adds one visit of the day: its hour, whether a bot made it, its client's hash and its
    /// top values (stored dimension, value).
    pub(super) fn add_one<'a>(
        &mut self,
        hour: u8,
        is_bot: bool,
        client_hash: u64,
        values: impl Iterator<Item = (u8, &'a Arc<str>)>,
    ) {
        add_hour(&mut self.hours, hour, 1, u64::from(is_bot));
        if !is_bot {
            self.uniques.insert_hash(client_hash);
        }
        for (dim, value) in values {
            self.add_dim(dim, value, 1);
        }
    }

    fn add_dim(&mut self, dim: u8, value: &Arc<str>, n: u64) {
        match self.dims.iter_mut().find(|d| d.0 == dim && d.1 == *value) {
            Some(d) => d.2 += n,
            None => self.dims.push((dim, Arc::clone(value), n)),
        }
    }

    /// Adds the counts of a later call.
    pub(super) fn merge(&mut self, other: &DayDelta) {
        for &(hour, visits, bots) in &other.hours {
            add_hour(&mut self.hours, hour, visits, bots);
        }
        for (dim, value, n) in &other.dims {
            self.add_dim(*dim, value, *n);
        }
        self.uniques.merge(&other.uniques);
    }

    /// Visits and bots counted.
    pub(super) fn counts(&self) -> (u64, u64) {
        self.hours
            .iter()
            .fold((0, 0), |(v, b), h| (v + h.1, b + h.2))
    }
}

/// Adds to an hour of a day's `(hour, visits, bots)` list, kept in hour order.
fn add_hour(hours: &mut Vec<(u8, u64, u64)>, hour: u8, visits: u64, bots: u64) {
    match hours.binary_search_by_key(&hour, |h| h.0) {
        Ok(i) => {
            hours[i].1 += visits;
            hours[i].2 += bots;
        }
        Err(i) => hours.insert(i, (hour, visits, bots)),
    }
}

/// Visits of any links, in arrival order, with every string stored once.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Block {
    /// The newest `at` of the block's visits: pruning reads it.
    pub(super) newest: Millis,
    /// The smallest id and `at` of the rows, which store their own as offsets from these.
    base_id: u64,
    base_at: Millis,
    /// The distinct strings of the block; rows refer to them by index. Shared, so that the
    /// visits read from a block hold one allocation per distinct string.
    strings: Vec<Arc<str>>,
    pub(super) rows: Vec<Row>,
}

/// One visit in a [`Block`]. String fields are indexes into `strings`; for optional ones,
/// 0 is `None` and n is `strings[n - 1]`.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Row {
    id: u64,
    pub(super) link_id: u64,
    at: u64,
    code: u32,
    client_id: u32,
    ip: u32,
    user_agent: u32,
    referer: u32,
    browser: u32,
    browser_version: u32,
    os: u32,
    os_version: u32,
    device: u32,
    is_bot: bool,
    country: u32,
    region: u32,
    city: u32,
    isp: u32,
    /// Optional like the others; rows written before routes existed have none.
    #[serde(default)]
    route: u32,
}

/// Builds a block's string table.
#[derive(Default)]
struct Strings<'a> {
    index: FastMap<&'a str, u32>,
    /// Shared strings by address: most of a block's visits hold the same few allocations (see
    /// [`Visit`]), and an address is cheaper to hash than a user agent.
    shared: FastMap<usize, u32>,
    list: Vec<Arc<str>>,
}

impl<'a> Strings<'a> {
    fn of(&mut self, s: &'a str) -> u32 {
        self.find_or(s, || Arc::from(s))
    }

    fn find_or(&mut self, s: &'a str, make: impl FnOnce() -> Arc<str>) -> u32 {
        if let Some(i) = self.index.get(s) {
            return *i;
        }
        let i = u32::try_from(self.list.len()).unwrap_or(u32::MAX);
        self.list.push(make());
        self.index.insert(s, i);
        i
    }

    fn of_shared(&mut self, s: &'a Arc<str>) -> u32 {
        // The visits outlive the block's building, so no address is reused meanwhile.
        let address = Arc::as_ptr(s).cast::<u8>() as usize;
        if let Some(i) = self.shared.get(&address) {
            return *i;
        }
        let i = self.find_or(s, || Arc::clone(s));
        self.shared.insert(address, i);
        i
    }

    fn of_opt_shared(&mut self, s: Option<&'a Arc<str>>) -> u32 {
        s.map_or(0, |s| self.of_shared(s).saturating_add(1))
    }
}

impl Block {
    pub(super) fn build<'a>(visits: impl Iterator<Item = &'a Visit> + Clone) -> Block {
        let base_id = visits.clone().map(|v| v.id).min().unwrap_or(0);
        let base_at = visits.clone().map(|v| v.at).min().unwrap_or(0);
        let newest = visits.clone().map(|v| v.at).max().unwrap_or(0);
        let mut strings = Strings::default();
        let rows = visits
            .map(|v| Row {
                id: v.id - base_id,
                link_id: v.link_id,
                at: v.at - base_at,
                code: strings.of(&v.code),
                client_id: strings.of_shared(&v.client_id),
                ip: strings.of_opt_shared(v.ip.as_ref()),
                user_agent: strings.of_shared(&v.user_agent),
                referer: strings.of_shared(&v.referer),
                browser: strings.of_shared(&v.browser),
                browser_version: strings.of_shared(&v.browser_version),
                os: strings.of_shared(&v.os),
                os_version: strings.of_shared(&v.os_version),
                device: strings.of_shared(&v.device),
                is_bot: v.is_bot,
                country: strings.of_opt_shared(v.country.as_ref()),
                region: strings.of_opt_shared(v.region.as_ref()),
                city: strings.of_opt_shared(v.city.as_ref()),
                isp: strings.of_opt_shared(v.isp.as_ref()),
                route: strings.of_opt_shared(v.route.as_ref()),
            })
            .collect();
        Block {
            newest,
            base_id,
            base_at,
            strings: strings.list,
            rows,
        }
    }

    /// The visit of a row; a string index out of range is corruption, not a panic.
    fn visit(&self, row: &Row) -> StoreResult<Visit> {
        let s = |i: u32| -> StoreResult<Arc<str>> {
            self.strings
                .get(i as usize)
                .cloned()
                .ok_or_else(|| corrupt("visit_blocks", "string index out of range"))
        };
        let opt = |i: u32| -> StoreResult<Option<Arc<str>>> {
            match i.checked_sub(1) {
                None => Ok(None),
                Some(i) => s(i).map(Some),
            }
        };
        Ok(Visit {
            id: self
                .base_id
                .checked_add(row.id)
                .ok_or_else(|| corrupt("visit_blocks", "visit id out of range"))?,
            link_id: row.link_id,
            code: s(row.code)?.to_string(),
            at: self.base_at.saturating_add(row.at),
            client_id: s(row.client_id)?,
            ip: opt(row.ip)?,
            user_agent: s(row.user_agent)?,
            referer: s(row.referer)?,
            browser: s(row.browser)?,
            browser_version: s(row.browser_version)?,
            os: s(row.os)?,
            os_version: s(row.os_version)?,
            device: s(row.device)?,
            is_bot: row.is_bot,
            country: opt(row.country)?,
            region: opt(row.region)?,
            city: opt(row.city)?,
            isp: opt(row.isp)?,
            route: opt(row.route)?,
        })
    }

    /// The visits of one link, in id order.
    pub(super) fn visits_of(&self, link_id: u64) -> StoreResult<Vec<Visit>> {
        let mut out = self
            .rows
            .iter()
            .filter(|r| r.link_id == link_id)
            .map(|r| self.visit(r))
            .collect::<StoreResult<Vec<_>>>()?;
        out.sort_by_key(|v| v.id);
        Ok(out)
    }
}

/// The first bytes of a zstd frame. A block written before compression is a MessagePack array
/// (its first byte 0x90–0x9f or 0xdc–0xdd), so the two forms never meet.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// zstd's fastest level. A block of 256 visits is about 7.5 KB of MessagePack (most of it the
/// rows' small integers, which repeat from row to row) and 2.1 KB compressed at level 1, 2.0
/// at level 3: measured over the 9,234 blocks of 2.35 M Zipf visits, 29.4 bytes a visit
/// stored against 8.2. The level buys little past 1, and the writer pays for it.
const ZSTD_LEVEL: i32 = 1;
/// Largest decompressed block read back: 256 rows of at most 1 KiB strings each stay far
/// below it, so more is damage, not a block.
const MAX_BLOCK_BYTES: usize = 16 << 20;

/// A block as stored: its MessagePack, compressed whole. Compressing the block, not the tree
/// (sled's own `compression`), costs one small frame per block written and nothing on the
/// other trees' writes; sled-wide compression was tried and cost a quarter of the redirect
/// rate (`benches/RESULTS.md`).
pub(super) fn encode_block(block: &Block) -> Vec<u8> {
    let raw = super::encode(block);
    // Compressing a buffer in memory fails only on allocation; the plain form stays readable.
    with_context(
        &COMPRESSOR,
        || zstd::bulk::Compressor::new(ZSTD_LEVEL),
        |c| c.compress(&raw),
    )
    .unwrap_or(raw)
}

pub(super) fn decode_block(bytes: &[u8]) -> StoreResult<Block> {
    if bytes.starts_with(&ZSTD_MAGIC) {
        let raw = with_context(&DECOMPRESSOR, zstd::bulk::Decompressor::new, |d| {
            d.decompress(bytes, MAX_BLOCK_BYTES)
        })
        .map_err(|e| corrupt("visit_blocks", e))?;
        return rmp_serde::from_slice(&raw).map_err(|e| corrupt("visit_blocks", e));
    }
    rmp_serde::from_slice(bytes).map_err(|e| corrupt("visit_blocks", e))
}

type Context<C> = std::cell::RefCell<Option<C>>;

thread_local! {
    /// A zstd context a thread, made once: `zstd::bulk::compress` makes and frees one a call
    /// (its tables), about a block every 3 ms under load.
    static COMPRESSOR: Context<zstd::bulk::Compressor<'static>> = const { Context::new(None) };
    static DECOMPRESSOR: Context<zstd::bulk::Decompressor<'static>> = const { Context::new(None) };
}

/// Runs `work` with this thread's context of `cell`, made by `make` the first time.
fn with_context<C: 'static, R>(
    cell: &'static std::thread::LocalKey<Context<C>>,
    make: impl FnOnce() -> std::io::Result<C>,
    work: impl FnOnce(&mut C) -> std::io::Result<R>,
) -> std::io::Result<R> {
    cell.with_borrow_mut(|slot| {
        let context = match slot {
            Some(context) => context,
            None => slot.insert(make()?),
        };
        work(context)
    })
}

/// Decodes a visit block and every visit in it (for [`super::check_record`]).
pub(super) fn check_block(bytes: &[u8]) -> StoreResult<()> {
    let block = decode_block(bytes)?;
    for row in &block.rows {
        block.visit(row)?;
    }
    Ok(())
}

/// Every visit of a stored block, for counting them again ([`super::visit_counts`]).
pub(super) fn block_all_visits(bytes: &[u8]) -> StoreResult<Vec<Visit>> {
    let block = decode_block(bytes)?;
    block.rows.iter().map(|r| block.visit(r)).collect()
}

/// (link id, visit id) of every row of a stored block, for rebuilding the unfolded index.
pub(super) fn block_rows(bytes: &[u8]) -> StoreResult<Vec<(u64, u64)>> {
    let block = decode_block(bytes)?;
    Ok(block
        .rows
        .iter()
        .map(|r| (r.link_id, block.base_id.saturating_add(r.id)))
        .collect())
}

/// A record that does not decode.
pub(super) fn corrupt(tree: &'static str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        tree,
        detail: e.to_string(),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::sled::encode;

    /// A visit with every kind of field, for the visit tests here and in `visits/`.
    pub(in crate::sled) fn visit(id: u64, link_id: u64, at: Millis, agent: &str) -> Visit {
        Visit {
            id,
            link_id,
            code: format!("c{link_id}"),
            at,
            client_id: "abc".into(),
            ip: (id % 2 == 0).then(|| "10.0.0.0".into()),
            user_agent: agent.into(),
            referer: "".into(),
            browser: "Chrome".into(),
            browser_version: "124".into(),
            os: "Windows".into(),
            os_version: "10".into(),
            device: "desktop".into(),
            is_bot: id % 3 == 0,
            country: None,
            region: Some("r".into()),
            city: None,
            isp: None,
            route: None,
        }
    }

    #[test]
    fn a_block_gives_back_every_visit_and_stores_strings_once() {
        let visits: Vec<Visit> = (10..20)
            .map(|i| visit(i, i % 3, 1_000 + i, "Mozilla/5.0 same agent"))
            .collect();
        let block = Block::build(visits.iter());
        assert_eq!(
            block
                .strings
                .iter()
                .filter(|s| s.as_ref() == "Mozilla/5.0 same agent")
                .count(),
            1
        );
        let back = decode_block(&encode_block(&block)).expect("decodes");
        assert_eq!(back.newest, 1_019);
        for link in 0..3 {
            let mine: Vec<Visit> = visits
                .iter()
                .filter(|v| v.link_id == link)
                .cloned()
                .collect();
            assert_eq!(back.visits_of(link).expect("visits"), mine);
        }
    }

    #[test]
    fn blocks_are_compressed_and_plain_ones_still_read() {
        let visits: Vec<Visit> = (0..256)
            .map(|i| {
                visit(
                    i,
                    i % 7,
                    1_000 + i,
                    "Mozilla/5.0 (X11; Linux x86_64) Chrome/124",
                )
            })
            .collect();
        let block = Block::build(visits.iter());
        let (plain, packed) = (encode(&block), encode_block(&block));
        assert!(packed.starts_with(&ZSTD_MAGIC));
        assert!(
            packed.len() * 2 < plain.len(),
            "{} vs {}",
            packed.len(),
            plain.len()
        );
        for bytes in [&plain, &packed] {
            assert_eq!(block_all_visits(bytes).expect("decodes"), visits);
        }
        let mut cut = packed.clone();
        cut.truncate(packed.len() / 2);
        assert!(check_block(&cut).is_err());
    }

    #[test]
    fn a_damaged_block_is_an_error() {
        let block = Block::build([visit(1, 1, 5, "a")].iter());
        let mut bytes = encode(&block);
        assert!(check_block(&bytes).is_ok());
        bytes.truncate(bytes.len() / 2);
        assert!(check_block(&bytes).is_err());
        let mut bad = Block::build([visit(1, 1, 5, "a")].iter());
        bad.rows[0].user_agent = 99;
        assert!(check_block(&encode(&bad)).is_err());
    }
}
