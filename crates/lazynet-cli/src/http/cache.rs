//! The server's file cache: files of at most [`CACHE_MAX_FILE`] bytes read
//! once and answered from memory (see "The file cache" in the docs of
//! [`super`]).
//!
//! **Owns:** [`FileCache`] (entries by request path, revalidation against the
//! file system after [`CACHE_VALID`], eviction of the entry used longest ago)
//! and its bounds ([`CacheLimits`]).
//!
//! **May not touch:** requests or responses; the only I/O is a `stat` of a
//! cached file's path when its entry is due, and reading a file the server
//! has already opened. Which file a request names, and whether it may be
//! served, is decided in [`files`](super::files) before anything is cached.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};

/// Largest file the cache keeps (larger ones stream from the file).
pub const CACHE_MAX_FILE: u64 = 1 << 20;
/// Most bytes the file cache holds.
pub const CACHE_MAX_BYTES: u64 = 64 << 20;
/// Most files the file cache holds.
pub const CACHE_MAX_ENTRIES: usize = 4096;
/// Age after which a cached file is checked against the file system again.
pub const CACHE_VALID: Duration = Duration::from_secs(1);

/// (size, modification time, inode): what tells that a file changed.
type Stamp = (u64, Option<SystemTime>, u64);

/// A cached file: its bytes and what tells whether the file changed.
#[derive(Debug)]
struct Cached {
    data: Rc<[u8]>,
    content_type: &'static str,
    /// The canonical path it was read from.
    path: PathBuf,
    /// The file's stamp when read.
    stamp: Stamp,
    checked: Instant,
    used: u64,
}

/// The file cache's bounds (defaults: the `CACHE_*` constants).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLimits {
    /// Largest file kept.
    pub max_file: u64,
    /// Most bytes held.
    pub max_bytes: u64,
    /// Most files held.
    pub max_entries: usize,
    /// Age after which an entry is checked against the file system.
    pub valid: Duration,
}

impl Default for CacheLimits {
    fn default() -> Self {
        CacheLimits {
            max_file: CACHE_MAX_FILE,
            max_bytes: CACHE_MAX_BYTES,
            max_entries: CACHE_MAX_ENTRIES,
            valid: CACHE_VALID,
        }
    }
}

/// Small files kept in memory (see the [`http`](super) docs). One per server; the
/// connections of that server share it.
#[derive(Debug, Default)]
pub struct FileCache {
    limits: CacheLimits,
    /// By request path (as sent, query removed).
    map: HashMap<Box<[u8]>, Cached>,
    bytes: u64,
    /// Use counter, for choosing the entry to evict.
    tick: u64,
    hits: u64,
    misses: u64,
}

fn stamp(m: &std::fs::Metadata) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    (m.len(), m.modified().ok(), m.ino())
}

impl FileCache {
    /// An empty cache with these bounds.
    pub(super) fn with_limits(limits: CacheLimits) -> FileCache {
        FileCache {
            limits,
            ..FileCache::default()
        }
    }

    /// The file for `url_path`, if cached and still valid.
    pub(super) fn get(&mut self, url_path: &[u8]) -> Option<(Rc<[u8]>, &'static str)> {
        self.tick += 1;
        let tick = self.tick;
        let e = self.map.get_mut(url_path)?;
        if e.checked.elapsed() >= self.limits.valid {
            let fresh = std::fs::metadata(&e.path)
                .ok()
                .filter(|m| m.is_file() && stamp(m) == e.stamp);
            if fresh.is_none() {
                let gone = self.map.remove(url_path)?;
                self.bytes -= gone.data.len() as u64;
                return None;
            }
            e.checked = Instant::now();
        }
        e.used = tick;
        self.hits += 1;
        Some((e.data.clone(), e.content_type))
    }

    /// Reads the open `file` (at `path`, `meta` its `fstat`) whole and
    /// keeps it under `url_path`, if it is small enough; the bytes, or
    /// `None` (the caller streams the file instead).
    pub(super) fn insert(
        &mut self,
        url_path: &[u8],
        file: &mut File,
        meta: &std::fs::Metadata,
        path: PathBuf,
        content_type: &'static str,
    ) -> Option<Rc<[u8]>> {
        self.misses += 1;
        let lim = self.limits;
        let len = meta.len();
        if len > lim.max_file || len > lim.max_bytes || lim.max_entries == 0 {
            return None;
        }
        let mut data = Vec::with_capacity(len as usize);
        // One byte more than expected tells a file that grew meanwhile.
        file.take(len + 1).read_to_end(&mut data).ok()?;
        if data.len() as u64 != len {
            return None;
        }
        while self.bytes + len > lim.max_bytes || self.map.len() >= lim.max_entries {
            let old = self
                .map
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())?;
            if let Some(e) = self.map.remove(&old) {
                self.bytes -= e.data.len() as u64;
            }
        }
        let data: Rc<[u8]> = data.into();
        self.bytes += len;
        self.tick += 1;
        self.map.insert(
            url_path.into(),
            Cached {
                data: data.clone(),
                content_type,
                path,
                stamp: stamp(meta),
                checked: Instant::now(),
                used: self.tick,
            },
        );
        Some(data)
    }

    /// (hits, misses, files held, bytes held).
    pub fn counters(&self) -> (u64, u64, usize, u64) {
        (self.hits, self.misses, self.map.len(), self.bytes)
    }
}
