//! HTTP/1.1 for `lazynet serve http` and `lazynet get`: transport-independent
//! ("sans-IO") state machines.
//!
//! # What this module owns
//!
//! * [`HttpConn`]: one server connection. The socket loop hands it received
//!   bytes ([`HttpConn::feed`]) and asks it for bytes to send
//!   ([`HttpConn::poll_output`]). It parses requests, answers them in order
//!   (pipelining), decides keep-alive, and generates response bodies on
//!   demand: `/bytes/N` from [`pattern_fill`], files under `--root` from an
//!   open [`std::fs::File`] in chunks, uploads hashed as they stream in. Memory
//!   per connection is bounded (header buffer of [`MAX_HEADER_BYTES`], at most
//!   [`MAX_QUEUED_RESPONSES`] queued responses, response heads of a few hundred
//!   bytes) and never proportional to a body.
//! * [`HttpGet`]: one client request for `lazynet get`: [`parse_url`], the
//!   request bytes ([`HttpGet::request`]), and a response parser
//!   ([`HttpGet::feed`]) that hands body bytes back as sub-slices of the input.
//! * The `/bytes/N` content: [`pattern_byte`], [`pattern_fill`],
//!   [`pattern_sha256`].
//!
//! # What it may not touch
//!
//! No sockets, no threads, no global state. The only I/O is the file system
//! under the configured root (metadata, open, read) when a request asks for
//! a file, and the only clock the monotonic one the file cache reads to
//! know when an entry is due for revalidation. Time-outs, connection limits
//! and the TCP socket API belong to the caller.
//!
//! # The file cache
//!
//! Files of at most [`CACHE_MAX_FILE`] bytes are read once and kept in
//! memory ([`FileCache`], shared by the connections of one server through
//! its [`ServerConfig`]): a request for one costs no system call, where an
//! uncached file costs a `stat`, a `realpath`, an `open`, an `fstat`, a
//! `read` and a `close`. An entry is revalidated (one `stat` of the file it
//! was read from: size, modification time, inode) when it is older than
//! [`CACHE_VALID`], like nginx's `open_file_cache_valid`; a change reloads
//! it, a vanished file drops it. The cache holds at most
//! [`CACHE_MAX_ENTRIES`] files and [`CACHE_MAX_BYTES`] bytes; when full, the
//! entry used longest ago makes room. Larger files stream from an open file
//! as before. Consequently responses carry no `Date` header (RFC 9110
//! §6.6.1: an origin server without a reliable clock must not send one).
//!
//! # Routes (server)
//!
//! | target                | methods    | answer |
//! |-----------------------|------------|--------|
//! | `/bytes/N`            | GET, HEAD  | `N` bytes of [`pattern_byte`]; `N` decimal, at most [`MAX_BYTES_N`] (larger → 400; not a number → 404) |
//! | `/upload`             | POST, PUT  | reads and discards the body; 200 with body `bytes=N sha256=HEX\n` |
//! | anything else         | GET, HEAD  | the file under `--root` (404 if no root) |
//!
//! Query strings are ignored. A known route with another method → 405 with
//! `Allow`; a method other than GET/HEAD/POST/PUT → 501.
//!
//! Files: the target's path is percent-decoded (malformed escapes → 400),
//! then split at `/`; a NUL byte → 400, a `..` segment → 403 (checked *after*
//! decoding, so `%2e%2e` and `..%2f` are caught; decoding happens once, so
//! `%252e` is the literal name `%2e`). Empty and `.` segments are skipped, so
//! the path is always relative to the root ("absolute" targets such as
//! `//etc/passwd` stay inside it). The result is canonicalized and must still
//! be under the canonical root (symlinks leaving the root → 403). A directory
//! serves its `index.html` (404 if absent; no redirect for a missing trailing
//! slash, no listings). Non-regular files → 403, permission errors → 403.
//! `Content-Type` by extension (html, txt, css, js, json, png, jpg, gif, svg,
//! pdf, wasm; otherwise `application/octet-stream`). If a file shrinks while
//! being sent, the connection is closed (the promised `Content-Length` can't be
//! kept).
//!
//! # Protocol: what is implemented (RFC 9112 = HTTP/1.1, RFC 9110 = semantics)
//!
//! * RFC 9112 §2.2: CRLF line ends, a bare LF also accepted as a line end;
//!   empty lines before a request line are ignored; a bare CR elsewhere → 400.
//! * §2.3, §3: request line `method SP request-target SP HTTP-version`, single
//!   spaces, method a token; `HTTP/1.0` and `HTTP/1.1` (`HTTP/1.x`, x > 1, is
//!   answered as 1.1; another major version → 505 and close; anything else →
//!   400 and close). Responses are always `HTTP/1.1`.
//! * §3.2: origin-form, and absolute-form `http://authority/path` (authority
//!   ignored); other forms → 400. §3.2 / RFC 9110 §7.2: an HTTP/1.1 request
//!   without exactly one `Host` → 400; more than one `Host` → 400 in any version.
//! * §5: field names are tokens, matched case-insensitively; whitespace before
//!   the colon → 400 (§5.1); obs-fold → 400 (§5.2); values trimmed of OWS;
//!   control characters other than HTAB in values → 400.
//! * Header section (request line + fields + blank line) limited to
//!   [`MAX_HEADER_BYTES`]; larger → 431 (RFC 6585 §5) and close.
//! * §6.1–6.3 request framing: `Content-Length` (digits only; a list of equal
//!   values is accepted, differing values → 400); no length → no body.
//!   **Chunked request bodies are not supported**: `Transfer-Encoding: chunked`
//!   → 411 Length Required (RFC 9112 §6.3 allows a server to require a
//!   length), any other transfer coding → 501 (§6.1), `Transfer-Encoding` in an
//!   HTTP/1.0 request → 400 (§6.1); all three close the connection because the
//!   body's end is unknown. Bodies of requests that don't need them (e.g. a GET
//!   with a length) are read and discarded so the connection stays in sync.
//! * RFC 9110 §10.1.1: `Expect: 100-continue` on an HTTP/1.1 request with a
//!   body gets an interim `100 Continue` before the body is read (curl waits
//!   for it on large uploads).
//! * §9.3 persistence: HTTP/1.1 keeps the connection unless `Connection:
//!   close`; HTTP/1.0 closes unless `Connection: keep-alive` (answered with
//!   `Connection: keep-alive`). A response that ends the connection carries
//!   `Connection: close`. Errors in the request line or header section → 4xx/5xx
//!   and close.
//! * §9.3.2 pipelining: requests are answered in order; input after a request
//!   that ends the connection is discarded.
//! * RFC 9110 §9.3.2 HEAD: same header fields as GET (including
//!   `Content-Length`), no body. Every response has a `Content-Length`.
//!
//! Client ([`HttpGet`]): status line `HTTP/1.x SP 3DIGIT [SP reason]`; 1xx
//! interim responses skipped (101 → error); body length per RFC 9112 §6.3:
//! 204/304 → none, `Transfer-Encoding` ending in `chunked` → chunked (§7.1:
//! chunk-size line bounded by [`MAX_CHUNK_LINE`], extensions ignored,
//! trailer fields read and discarded, bounded), other `Transfer-Encoding` →
//! until close, `Content-Length` → that many bytes, otherwise until close.
//!
//! # The `/bytes/N` pattern
//!
//! Byte `i` of every `/bytes/N` body is `pattern_byte(i) = (i % 251) as u8`
//! (251 is prime, so an offset error anywhere changes the content). The same
//! SHA-256 with Python (prints the hex digest of the first `N` bytes):
//!
//! ```text
//! python3 -c 'import hashlib,sys;n=int(sys.argv[1]);h=hashlib.sha256();b=bytes(range(251))*4096;exec("while n>0:h.update(b[:n]);n-=len(b)");print(h.hexdigest())' N
//! ```
//!
//! (`b` is a whole number of periods long, so each block continues the
//! pattern.) Or the bytes themselves, e.g. to compare with `sha256sum` / `cmp`:
//! `python3 -c 'import sys;n=int(sys.argv[1]);sys.stdout.buffer.write((bytes(range(251))*(n//251+1))[:n])' N`.
// Some accessors (headers, framing, pattern_sha256, ...) serve the tests
// and tools rather than the binary.

// Until `serve http` and `get` use everything here.

use std::cell::RefCell;
use std::collections::HashMap;
use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::net::Ipv4Addr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

use sha2::{Digest, Sha256};

#[cfg(test)]
mod tests;

/// The largest request header section (request line, fields, blank line) the
/// server accepts; larger → 431.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;
/// The largest response header section the client accepts.
pub const MAX_RESPONSE_HEADER_BYTES: usize = 64 * 1024;
/// The longest chunk-size line (with extensions) the client accepts.
pub const MAX_CHUNK_LINE: usize = 4096;
/// The most trailer bytes after the last chunk the client accepts.
pub const MAX_TRAILER_BYTES: usize = 8 * 1024;
/// The largest `N` for `/bytes/N` (1 TiB).
pub const MAX_BYTES_N: u64 = 1 << 40;
/// Responses queued and not yet fully output after which [`HttpConn::feed`]
/// stops consuming input (back-pressure on pipelining clients).
pub const MAX_QUEUED_RESPONSES: usize = 16;
/// Largest file the cache keeps (larger ones stream from the file).
pub const CACHE_MAX_FILE: u64 = 1 << 20;
/// Most bytes the file cache holds.
pub const CACHE_MAX_BYTES: u64 = 64 << 20;
/// Most files the file cache holds.
pub const CACHE_MAX_ENTRIES: usize = 4096;
/// Age after which a cached file is checked against the file system again.
pub const CACHE_VALID: std::time::Duration = std::time::Duration::from_secs(1);
/// `lazynet/VERSION`, used as `Server` and `User-Agent`.
pub const PRODUCT: &str = concat!("lazynet/", env!("CARGO_PKG_VERSION"));

// ---------------------------------------------------------------------------
// The /bytes/N pattern
// ---------------------------------------------------------------------------

const PERIOD: usize = 251;
/// A whole number of periods, so copies can run long before wrapping.
const TABLE_LEN: usize = PERIOD * 64;
static TABLE: [u8; TABLE_LEN] = {
    let mut t = [0u8; TABLE_LEN];
    let mut i = 0;
    while i < TABLE_LEN {
        t[i] = (i % PERIOD) as u8;
        i += 1;
    }
    t
};

/// Byte `i` of every `/bytes/N` body: `(i % 251) as u8`.
pub fn pattern_byte(i: u64) -> u8 {
    (i % PERIOD as u64) as u8
}

/// Fills `out` with pattern bytes `offset..offset + out.len()` (block copies
/// from a table, one modulo per call).
pub fn pattern_fill(offset: u64, out: &mut [u8]) {
    let mut start = (offset % PERIOD as u64) as usize;
    let mut pos = 0;
    while pos < out.len() {
        let n = (out.len() - pos).min(TABLE_LEN - start);
        out[pos..pos + n].copy_from_slice(&TABLE[start..start + n]);
        pos += n;
        start = (start + n) % PERIOD;
    }
}

/// SHA-256 of the first `n` pattern bytes (the body of `/bytes/n`).
pub fn pattern_sha256(n: u64) -> [u8; 32] {
    let mut h = Sha256::new();
    let mut left = n;
    // TABLE is a whole number of periods, so each block continues the pattern.
    while left > 0 {
        let k = left.min(TABLE_LEN as u64) as usize;
        h.update(&TABLE[..k]);
        left -= k as u64;
    }
    h.finalize().into()
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

// ---------------------------------------------------------------------------
// Shared parsing helpers
// ---------------------------------------------------------------------------

/// Accumulates a header section up to its blank line, at most `max` bytes.
struct HeadBuf {
    buf: Vec<u8>,
    scan_from: usize,
    max: usize,
}

enum HeadStep {
    /// All of the input consumed, no end yet.
    NeedMore,
    /// The section ends after this many bytes of the input.
    Complete(usize),
    TooLarge,
}

impl HeadBuf {
    fn new(max: usize) -> HeadBuf {
        HeadBuf {
            buf: Vec::new(),
            scan_from: 0,
            max,
        }
    }

    fn clear(&mut self) {
        self.buf.clear();
        self.scan_from = 0;
    }

    fn push(&mut self, input: &[u8]) -> HeadStep {
        let old = self.buf.len();
        let take = input.len().min(self.max - old);
        self.buf.extend_from_slice(&input[..take]);
        let b = &self.buf;
        let mut i = self.scan_from;
        while i < b.len() {
            if b[i] == b'\n' {
                // An empty line: LF LF, or LF CR LF.
                if i + 1 < b.len() && b[i + 1] == b'\n' {
                    return self.complete(old, i + 2);
                }
                if i + 2 < b.len() && b[i + 1] == b'\r' && b[i + 2] == b'\n' {
                    return self.complete(old, i + 3);
                }
                if i + 2 >= b.len() {
                    // Not enough look-ahead yet: look again from here.
                    self.scan_from = i;
                    break;
                }
            }
            i += 1;
            self.scan_from = i;
        }
        if self.buf.len() >= self.max {
            HeadStep::TooLarge
        } else {
            HeadStep::NeedMore
        }
    }

    fn complete(&mut self, old: usize, end: usize) -> HeadStep {
        self.buf.truncate(end);
        HeadStep::Complete(end - old)
    }
}

/// Splits a complete header section into lines (without line ends). A bare CR
/// anywhere is an error. The last (empty) line is not returned.
fn split_lines(head: &[u8]) -> Result<Vec<&[u8]>, ()> {
    let mut lines = Vec::new();
    for raw in head.split(|&b| b == b'\n') {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.contains(&b'\r') {
            return Err(());
        }
        lines.push(line);
    }
    // The section ends with an empty line followed by the final LF's empty split.
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    Ok(lines)
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// `name: value` → (name, trimmed value); RFC 9112 §5.
fn parse_field(line: &[u8]) -> Result<(&[u8], &[u8]), ()> {
    if matches!(line.first(), Some(b' ' | b'\t')) {
        return Err(()); // obs-fold (§5.2)
    }
    let colon = line.iter().position(|&b| b == b':').ok_or(())?;
    let name = &line[..colon];
    if !is_token(name) {
        return Err(()); // includes whitespace before the colon (§5.1)
    }
    let value = trim_ows(&line[colon + 1..]);
    if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err(());
    }
    Ok((name, value))
}

/// Content-Length value: `1*DIGIT`, or a list of identical such values
/// (RFC 9110 §8.6). Combines with an earlier value.
fn parse_content_length(value: &[u8], prev: Option<u64>) -> Result<u64, ()> {
    let mut result = prev;
    for part in value.split(|&b| b == b',') {
        let part = trim_ows(part);
        if part.is_empty() || part.len() > 19 || !part.iter().all(u8::is_ascii_digit) {
            return Err(());
        }
        let n: u64 = std::str::from_utf8(part)
            .map_err(|_| ())?
            .parse()
            .map_err(|_| ())?;
        match result {
            Some(p) if p != n => return Err(()),
            _ => result = Some(n),
        }
    }
    result.ok_or(())
}

/// Comma-separated list elements, trimmed, empty ones skipped.
fn list_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|s| !s.is_empty())
}

/// `HTTP/d.d` → (major, minor).
fn parse_version(v: &[u8]) -> Option<(u8, u8)> {
    match v {
        [b'H', b'T', b'T', b'P', b'/', ma, b'.', mi]
            if ma.is_ascii_digit() && mi.is_ascii_digit() =>
        {
            Some((ma - b'0', mi - b'0'))
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------

/// Spins for `ns` nanoseconds of wall time on this thread.
fn busy_for(ns: u64) {
    let t0 = std::time::Instant::now();
    while (t0.elapsed().as_nanos() as u64) < ns {
        std::hint::spin_loop();
    }
}

/// A cached file: its bytes and what tells whether the file changed.
#[derive(Debug)]
struct Cached {
    data: Rc<[u8]>,
    content_type: &'static str,
    /// The canonical path it was read from.
    path: PathBuf,
    /// (size, modification time, inode) when read.
    stamp: (u64, Option<std::time::SystemTime>, u64),
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
    pub valid: std::time::Duration,
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

/// Small files kept in memory (see the module docs). One per server; the
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

fn stamp(m: &std::fs::Metadata) -> (u64, Option<std::time::SystemTime>, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.len(), m.modified().ok(), m.ino())
}

impl FileCache {
    /// The file for `url_path`, if cached and still valid.
    fn get(&mut self, url_path: &[u8]) -> Option<(Rc<[u8]>, &'static str)> {
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
    fn insert(
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

/// Server settings shared by all connections (of one thread: the file
/// cache is not shared across threads).
#[derive(Debug)]
pub struct ServerConfig {
    /// Canonical document root, if files are served.
    root: Option<PathBuf>,
    /// Small files in memory (see the module docs); `None`: off.
    cache: Option<RefCell<FileCache>>,
    /// Simulated application work per request, in nanoseconds of busy CPU
    /// (the experiments' knob that makes the server's core the
    /// bottleneck, as a real application's work would).
    work_ns: u64,
}

impl ServerConfig {
    /// Files are served from `root` (canonicalized here; an error if it
    /// doesn't exist); `None` serves only `/bytes/N` and `/upload`.
    pub fn new(root: Option<&Path>) -> io::Result<ServerConfig> {
        let root = match root {
            Some(r) => {
                let c = r.canonicalize()?;
                if !c.is_dir() {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{} is not a directory", r.display()),
                    ));
                }
                Some(c)
            }
            None => None,
        };
        Ok(ServerConfig {
            root,
            cache: Some(RefCell::new(FileCache::default())),
            work_ns: 0,
        })
    }

    /// Turns the file cache off: every request opens and reads its file.
    pub fn without_cache(mut self) -> ServerConfig {
        self.cache = None;
        self
    }

    /// The file cache with other bounds.
    pub fn with_cache(mut self, limits: CacheLimits) -> ServerConfig {
        self.cache = Some(RefCell::new(FileCache {
            limits,
            ..FileCache::default()
        }));
        self
    }

    /// The file cache's (hits, misses, files held, bytes held), if on.
    pub fn cache_counters(&self) -> Option<(u64, u64, usize, u64)> {
        self.cache.as_ref().map(|c| c.borrow().counters())
    }

    /// Burns `ns` of CPU per request before answering it (see `work_ns`).
    pub fn with_work_ns(mut self, ns: u64) -> ServerConfig {
        self.work_ns = ns;
        self
    }

    /// The canonical root.
    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Get,
    Head,
    Post,
    Put,
    Other,
}

/// Where response body bytes come from.
enum Body {
    Empty,
    Mem {
        data: Vec<u8>,
        pos: usize,
    },
    Pattern {
        offset: u64,
        remaining: u64,
    },
    File {
        file: File,
        remaining: u64,
    },
    /// A cached file.
    Shared {
        data: Rc<[u8]>,
        pos: usize,
    },
}

/// One queued response: head bytes, then body.
struct Response {
    head: Vec<u8>,
    head_pos: usize,
    body: Body,
    /// The connection ends after this response.
    close: bool,
}

enum WriteResult {
    /// More to write.
    Partial,
    Finished,
    /// The body source failed (file shrank or a read error): close now.
    Failed,
}

impl Response {
    fn write(&mut self, out: &mut [u8], n: &mut usize) -> WriteResult {
        let h = (self.head.len() - self.head_pos).min(out.len() - *n);
        out[*n..*n + h].copy_from_slice(&self.head[self.head_pos..self.head_pos + h]);
        self.head_pos += h;
        *n += h;
        if self.head_pos < self.head.len() {
            return WriteResult::Partial;
        }
        match &mut self.body {
            Body::Empty => {}
            Body::Shared { data, pos } => {
                let k = (data.len() - *pos).min(out.len() - *n);
                out[*n..*n + k].copy_from_slice(&data[*pos..*pos + k]);
                *pos += k;
                *n += k;
                if *pos < data.len() {
                    return WriteResult::Partial;
                }
            }
            Body::Mem { data, pos } => {
                let k = (data.len() - *pos).min(out.len() - *n);
                out[*n..*n + k].copy_from_slice(&data[*pos..*pos + k]);
                *pos += k;
                *n += k;
                if *pos < data.len() {
                    return WriteResult::Partial;
                }
            }
            Body::Pattern { offset, remaining } => {
                let k = (*remaining).min((out.len() - *n) as u64) as usize;
                pattern_fill(*offset, &mut out[*n..*n + k]);
                *offset += k as u64;
                *remaining -= k as u64;
                *n += k;
                if *remaining > 0 {
                    return WriteResult::Partial;
                }
            }
            Body::File { file, remaining } => {
                while *remaining > 0 && *n < out.len() {
                    let k = (*remaining).min((out.len() - *n) as u64) as usize;
                    match file.read(&mut out[*n..*n + k]) {
                        Ok(0) => return WriteResult::Failed,
                        Ok(got) => {
                            *n += got;
                            *remaining -= got as u64;
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => return WriteResult::Failed,
                    }
                }
                if *remaining > 0 {
                    return WriteResult::Partial;
                }
            }
        }
        WriteResult::Finished
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        411 => "Length Required",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

/// How the connection is kept, as decided from one request.
#[derive(Debug, Clone, Copy)]
struct Persist {
    /// The connection ends after this response.
    close: bool,
    /// HTTP/1.0 keep-alive: say so in the response.
    announce_keep_alive: bool,
}

impl Persist {
    const CLOSE: Persist = Persist {
        close: true,
        announce_keep_alive: false,
    };
}

struct ResponseBuilder {
    status: u16,
    content_type: &'static str,
    extra: Vec<(&'static str, String)>,
    len: u64,
    body: Body,
}

impl ResponseBuilder {
    fn text(status: u16, text: String) -> ResponseBuilder {
        ResponseBuilder {
            status,
            content_type: "text/plain; charset=utf-8",
            extra: Vec::new(),
            len: text.len() as u64,
            body: Body::Mem {
                data: text.into_bytes(),
                pos: 0,
            },
        }
    }

    fn error(status: u16) -> ResponseBuilder {
        Self::text(status, format!("{status} {}\n", reason(status)))
    }

    fn allow(status: u16, allow: &'static str) -> ResponseBuilder {
        let mut r = Self::error(status);
        r.extra.push(("Allow", allow.to_string()));
        r
    }

    fn build(self, head_only: bool, persist: Persist) -> Response {
        use std::fmt::Write;
        let mut h = String::with_capacity(200);
        let _ = write!(
            h,
            "HTTP/1.1 {} {}\r\nServer: {PRODUCT}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.len
        );
        for (k, v) in &self.extra {
            let _ = write!(h, "{k}: {v}\r\n");
        }
        if persist.close {
            h.push_str("Connection: close\r\n");
        } else if persist.announce_keep_alive {
            h.push_str("Connection: keep-alive\r\n");
        }
        h.push_str("\r\n");
        Response {
            head: h.into_bytes(),
            head_pos: 0,
            body: if head_only { Body::Empty } else { self.body },
            close: persist.close,
        }
    }
}

/// What to answer once a request's body has been read.
enum Pending {
    Ready(Response),
    Upload { head_only: bool, persist: Persist },
}

enum In {
    /// Reading a request line and header section.
    Head,
    /// Reading (and discarding) a request body.
    Body {
        remaining: u64,
        count: u64,
        hasher: Option<Box<Sha256>>,
        pending: Pending,
    },
    /// The last request has been read: further input is discarded.
    Closed,
}

/// One server connection (see the module docs).
///
/// Driving it from a socket loop:
///
/// ```text
/// let mut conn = HttpConn::new(cfg.clone());
/// let mut rx = Vec::new();            // received, not yet consumed
/// loop {
///     // 1. input: append what the socket has to rx, then
///     let used = conn.feed(&rx); rx.drain(..used);
///     //    on the peer's FIN: conn.on_eof();
///     // 2. output: while the socket can take more,
///     //    let n = conn.poll_output(&mut buf[..room]); send buf[..n] (all of it);
///     //    n == 0 → nothing to send now.
///     // 3. if conn.wants_close() (and everything returned by poll_output
///     //    has been handed to the socket): close the socket, done.
///     // feed() may consume less than offered (MAX_QUEUED_RESPONSES reached):
///     // keep the rest and offer it again after poll_output made progress.
/// }
/// ```
pub struct HttpConn {
    cfg: Rc<ServerConfig>,
    head: HeadBuf,
    state: In,
    queue: VecDeque<Response>,
    /// The last response has been fully output (or a body failed).
    closed: bool,
    /// The peer sent its FIN.
    eof: bool,
    requests: u64,
}

impl HttpConn {
    pub fn new(cfg: Rc<ServerConfig>) -> HttpConn {
        HttpConn {
            cfg,
            head: HeadBuf::new(MAX_HEADER_BYTES),
            state: In::Head,
            queue: VecDeque::new(),
            closed: false,
            eof: false,
            requests: 0,
        }
    }

    /// Consumes request bytes; returns how many were consumed. Less than
    /// `input.len()` only when [`MAX_QUEUED_RESPONSES`] responses wait to be
    /// output: offer the rest again after [`poll_output`](Self::poll_output).
    /// After the connection's last request, all input is consumed and ignored.
    pub fn feed(&mut self, input: &[u8]) -> usize {
        let mut pos = 0;
        while pos < input.len() {
            match &mut self.state {
                In::Closed => return input.len(),
                In::Body {
                    remaining,
                    count,
                    hasher,
                    ..
                } => {
                    let k = (*remaining).min((input.len() - pos) as u64) as usize;
                    if let Some(h) = hasher {
                        h.update(&input[pos..pos + k]);
                    }
                    *remaining -= k as u64;
                    *count += k as u64;
                    pos += k;
                    if *remaining == 0 {
                        self.finish_body();
                    }
                }
                In::Head => {
                    if self.queue.len() >= MAX_QUEUED_RESPONSES {
                        return pos;
                    }
                    if self.head.buf.is_empty() {
                        // RFC 9112 §2.2: ignore empty lines before a request line.
                        let skip = input[pos..]
                            .iter()
                            .take_while(|&&b| b == b'\r' || b == b'\n')
                            .count();
                        pos += skip;
                        if pos == input.len() {
                            break;
                        }
                    }
                    match self.head.push(&input[pos..]) {
                        HeadStep::NeedMore => pos = input.len(),
                        HeadStep::TooLarge => {
                            self.head.clear();
                            self.fail(431);
                            return input.len();
                        }
                        HeadStep::Complete(k) => {
                            pos += k;
                            let head = std::mem::take(&mut self.head.buf);
                            self.head.clear();
                            self.on_request(&head);
                            // Keep the allocation for the next request.
                            self.head.buf = head;
                            self.head.buf.clear();
                        }
                    }
                }
            }
        }
        pos
    }

    /// The peer will send nothing more (FIN). Queued responses are still
    /// output; a partial request is dropped.
    pub fn on_eof(&mut self) {
        self.eof = true;
    }

    /// Writes response bytes into `out`; returns how many (0: nothing to send
    /// now). Every byte returned must be sent.
    pub fn poll_output(&mut self, out: &mut [u8]) -> usize {
        let mut n = 0;
        while n < out.len() && !self.closed {
            let Some(r) = self.queue.front_mut() else {
                break;
            };
            match r.write(out, &mut n) {
                WriteResult::Partial => {}
                WriteResult::Finished => {
                    let close = r.close;
                    self.queue.pop_front();
                    if close {
                        self.closed = true;
                    }
                }
                WriteResult::Failed => self.closed = true,
            }
        }
        if self.closed {
            self.queue.clear();
            self.state = In::Closed;
        }
        n
    }

    /// Whether response bytes are waiting for [`poll_output`](Self::poll_output).
    pub fn has_output(&self) -> bool {
        !self.closed && !self.queue.is_empty()
    }

    /// True once the connection should be closed: the last response has been
    /// fully output by [`poll_output`](Self::poll_output) (a `Connection:
    /// close` or error response, a failed file), or the peer's FIN came and
    /// everything queued has been output. After a FIN, offer any input still
    /// held back by [`feed`](Self::feed)'s back-pressure before trusting this
    /// (the connection can't see the caller's buffer).
    pub fn wants_close(&self) -> bool {
        self.closed || (self.eof && self.queue.is_empty())
    }

    /// Requests parsed so far.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// A request line / header error: answer `status`, then close.
    fn fail(&mut self, status: u16) {
        self.queue
            .push_back(ResponseBuilder::error(status).build(false, Persist::CLOSE));
        self.state = In::Closed;
    }

    fn finish_body(&mut self) {
        let In::Body {
            count,
            hasher,
            pending,
            ..
        } = std::mem::replace(&mut self.state, In::Head)
        else {
            unreachable!()
        };
        let response = match pending {
            Pending::Ready(r) => r,
            Pending::Upload { head_only, persist } => {
                let digest = hasher.map(|h| *h).unwrap_or_default().finalize();
                ResponseBuilder::text(200, format!("bytes={count} sha256={}\n", hex(&digest)))
                    .build(head_only, persist)
            }
        };
        self.push_final(response);
    }

    fn push_final(&mut self, r: Response) {
        if r.close {
            self.state = In::Closed;
        }
        self.queue.push_back(r);
    }

    fn on_request(&mut self, head: &[u8]) {
        self.requests += 1;
        if self.cfg.work_ns > 0 {
            busy_for(self.cfg.work_ns);
        }
        let Ok(lines) = split_lines(head) else {
            return self.fail(400);
        };
        let Some((request_line, fields)) = lines.split_first() else {
            return self.fail(400);
        };
        // Request line.
        let mut parts = request_line.split(|&b| b == b' ');
        let (Some(method), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return self.fail(400);
        };
        if !is_token(method)
            || target.is_empty()
            || !target.iter().all(|&b| (0x21..0x7f).contains(&b))
        {
            return self.fail(400);
        }
        let Some((major, minor)) = parse_version(version) else {
            return self.fail(400);
        };
        if major != 1 {
            return self.fail(505);
        }
        let http10 = minor == 0;

        // Header fields.
        let mut hosts = 0;
        let mut content_length: Option<u64> = None;
        let mut transfer_encoding: Option<Vec<u8>> = None;
        let mut conn_close = false;
        let mut conn_keep_alive = false;
        let mut expect_continue = false;
        for line in fields {
            let Ok((name, value)) = parse_field(line) else {
                return self.fail(400);
            };
            if name.eq_ignore_ascii_case(b"host") {
                hosts += 1;
            } else if name.eq_ignore_ascii_case(b"content-length") {
                match parse_content_length(value, content_length) {
                    Ok(n) => content_length = Some(n),
                    Err(()) => return self.fail(400),
                }
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                let te = transfer_encoding.get_or_insert_with(Vec::new);
                if !te.is_empty() {
                    te.push(b',');
                }
                te.extend_from_slice(value);
            } else if name.eq_ignore_ascii_case(b"connection") {
                for item in list_items(value) {
                    conn_close |= item.eq_ignore_ascii_case(b"close");
                    conn_keep_alive |= item.eq_ignore_ascii_case(b"keep-alive");
                }
            } else if name.eq_ignore_ascii_case(b"expect") {
                expect_continue |= value.eq_ignore_ascii_case(b"100-continue");
            }
        }
        if hosts > 1 || (!http10 && hosts == 0) {
            return self.fail(400);
        }
        if let Some(te) = transfer_encoding {
            // RFC 9112 §6.1 / §6.3: we don't read chunked request bodies.
            if http10 {
                return self.fail(400);
            }
            let last = list_items(&te).last().unwrap_or(b"");
            return self.fail(if last.eq_ignore_ascii_case(b"chunked") {
                411
            } else {
                501
            });
        }
        let persist = Persist {
            close: conn_close || (http10 && !conn_keep_alive),
            announce_keep_alive: http10 && conn_keep_alive && !conn_close,
        };

        let method = match method {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            _ => Method::Other,
        };
        let head_only = method == Method::Head;
        let body_len = content_length.unwrap_or(0);
        let pending = match self.route(method, target) {
            Ok(Some(r)) => Pending::Ready(r.build(head_only, persist)),
            Ok(None) => Pending::Upload { head_only, persist },
            Err(status) => return self.fail(status),
        };
        if body_len == 0 {
            self.state = In::Body {
                remaining: 0,
                count: 0,
                hasher: None,
                pending,
            };
            self.finish_body();
            return;
        }
        if expect_continue && !http10 {
            self.queue.push_back(Response {
                head: b"HTTP/1.1 100 Continue\r\n\r\n".to_vec(),
                head_pos: 0,
                body: Body::Empty,
                close: false,
            });
        }
        let hasher = matches!(pending, Pending::Upload { .. }).then(|| Box::new(Sha256::new()));
        self.state = In::Body {
            remaining: body_len,
            count: 0,
            hasher,
            pending,
        };
    }

    /// `Ok(Some(response))`, `Ok(None)` for an upload (answered after the
    /// body), or `Err(status)` for a request error that closes the connection.
    fn route(&self, method: Method, target: &[u8]) -> Result<Option<ResponseBuilder>, u16> {
        if method == Method::Other {
            return Ok(Some(ResponseBuilder::error(501)));
        }
        // Origin-form, or absolute-form (RFC 9112 §3.2.2) with the authority dropped.
        let path = if target.starts_with(b"/") {
            target
        } else if target.len() >= 7 && target[..7].eq_ignore_ascii_case(b"http://") {
            let rest = &target[7..];
            match rest.iter().position(|&b| b == b'/' || b == b'?') {
                Some(i) if rest[i] == b'/' => &rest[i..],
                _ => b"/",
            }
        } else {
            return Err(400);
        };
        let path = match path.iter().position(|&b| b == b'?') {
            Some(i) => &path[..i],
            None => path,
        };
        let get_like = matches!(method, Method::Get | Method::Head);

        if path == b"/upload" {
            return Ok(if matches!(method, Method::Post | Method::Put) {
                None
            } else {
                Some(ResponseBuilder::allow(405, "POST, PUT"))
            });
        }
        if let Some(n) = path.strip_prefix(b"/bytes/") {
            if !get_like {
                return Ok(Some(ResponseBuilder::allow(405, "GET, HEAD")));
            }
            if n.is_empty() || n.len() > 20 || !n.iter().all(u8::is_ascii_digit) {
                return Ok(Some(ResponseBuilder::error(404)));
            }
            let n: u64 = match std::str::from_utf8(n).ok().and_then(|s| s.parse().ok()) {
                Some(n) if n <= MAX_BYTES_N => n,
                _ => {
                    return Ok(Some(ResponseBuilder::text(
                        400,
                        format!("400 Bad Request: /bytes/N takes N <= {MAX_BYTES_N}\n"),
                    )))
                }
            };
            return Ok(Some(ResponseBuilder {
                status: 200,
                content_type: "application/octet-stream",
                extra: Vec::new(),
                len: n,
                body: Body::Pattern {
                    offset: 0,
                    remaining: n,
                },
            }));
        }
        if !get_like {
            return Ok(Some(ResponseBuilder::allow(405, "GET, HEAD")));
        }
        let Some(root) = self.cfg.root.as_deref() else {
            return Ok(Some(ResponseBuilder::error(404)));
        };
        let cached = |data: Rc<[u8]>, content_type| ResponseBuilder {
            status: 200,
            content_type,
            extra: Vec::new(),
            len: data.len() as u64,
            body: Body::Shared { data, pos: 0 },
        };
        if let Some(c) = &self.cfg.cache {
            if let Some((data, ct)) = c.borrow_mut().get(path) {
                return Ok(Some(cached(data, ct)));
            }
        }
        Ok(Some(match open_file(root, path) {
            Ok((mut file, meta, content_type, canonical)) => {
                let len = meta.len();
                let kept = self.cfg.cache.as_ref().and_then(|c| {
                    c.borrow_mut()
                        .insert(path, &mut file, &meta, canonical, content_type)
                });
                match kept {
                    Some(data) => cached(data, content_type),
                    None => {
                        // A failed or partial read into the cache moved
                        // the file's position: stream from the start.
                        if std::io::Seek::rewind(&mut file).is_err() {
                            return Ok(Some(ResponseBuilder::error(500)));
                        }
                        ResponseBuilder {
                            status: 200,
                            content_type,
                            extra: Vec::new(),
                            len,
                            body: Body::File {
                                file,
                                remaining: len,
                            },
                        }
                    }
                }
            }
            Err(status) => ResponseBuilder::error(status),
        }))
    }
}

/// `%XX` decoding (RFC 3986 §2.1); `None` for a malformed escape.
pub fn percent_decode(s: &[u8]) -> Option<Vec<u8>> {
    fn hexval(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            let hi = hexval(*s.get(i + 1)?)?;
            let lo = hexval(*s.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    Some(out)
}

/// The file-system path under `root` for a URL path, or the status to answer
/// (400 malformed, 403 traversal). Doesn't touch the file system.
pub fn resolve_path(root: &Path, url_path: &[u8]) -> Result<PathBuf, u16> {
    let decoded = percent_decode(url_path).ok_or(400u16)?;
    if decoded.contains(&0) {
        return Err(400);
    }
    let mut p = root.to_path_buf();
    for seg in decoded.split(|&b| b == b'/') {
        match seg {
            b"" | b"." => {}
            b".." => return Err(403),
            _ => p.push(std::ffi::OsStr::from_bytes(seg)),
        }
    }
    Ok(p)
}

fn status_for(e: &io::Error) -> u16 {
    match e.kind() {
        io::ErrorKind::PermissionDenied => 403,
        _ => 404,
    }
}

/// Opens the file for `url_path` under the canonical `root`: (file, its
/// metadata, content type, canonical path) or the status to answer.
fn open_file(
    root: &Path,
    url_path: &[u8],
) -> Result<(File, std::fs::Metadata, &'static str, PathBuf), u16> {
    let mut p = resolve_path(root, url_path)?;
    let mut meta = std::fs::metadata(&p).map_err(|e| status_for(&e))?;
    if meta.is_dir() {
        p.push("index.html");
        meta = std::fs::metadata(&p).map_err(|e| status_for(&e))?;
        if meta.is_dir() {
            return Err(404);
        }
    } else if url_path.ends_with(b"/") {
        return Err(404); // "file/" is not a directory
    }
    let canonical = p.canonicalize().map_err(|e| status_for(&e))?;
    if !canonical.starts_with(root) {
        return Err(403);
    }
    if !meta.is_file() {
        return Err(403);
    }
    let file = File::open(&canonical).map_err(|e| status_for(&e))?;
    // Length of what was opened (the path may have changed meanwhile).
    let meta = file.metadata().map_err(|_| 500u16)?;
    if !meta.is_file() {
        return Err(403);
    }
    let ct = content_type(&canonical);
    Ok((file, meta, ct, canonical))
}

/// `Content-Type` by file extension.
pub fn content_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("txt") => "text/plain; charset=utf-8",
        Some("css") => "text/css",
        Some("js") => "text/javascript",
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("svg") => "image/svg+xml",
        Some("pdf") => "application/pdf",
        Some("wasm") => "application/wasm",
        _ => "application/octet-stream",
    }
}

// ---------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------

/// A parsed `http://HOST[:PORT]/PATH` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub host: Ipv4Addr,
    pub port: u16,
    /// Path and query as sent in the request line (at least `/`).
    pub path: String,
}

/// Why a URL was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlError {
    /// Not `http://` (https is not supported).
    Scheme,
    /// `user@` in the authority.
    Userinfo,
    /// The host is not an IPv4 literal (no name resolution).
    Host,
    /// The port is not a number in 1..=65535.
    Port,
    /// The path has spaces or control characters.
    Path,
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UrlError::Scheme => "only http:// URLs are supported",
            UrlError::Userinfo => "user information in URLs is not supported",
            UrlError::Host => "the host must be an IPv4 address (no name resolution)",
            UrlError::Port => "bad port",
            UrlError::Path => "the path has spaces or control characters",
        })
    }
}

impl std::error::Error for UrlError {}

/// Parses `http://HOST[:PORT][/PATH][?QUERY][#FRAGMENT]` with an IPv4 literal
/// host; the fragment is dropped, an empty path becomes `/`.
pub fn parse_url(s: &str) -> Result<Url, UrlError> {
    if s.len() < 7 || !s[..7].eq_ignore_ascii_case("http://") {
        return Err(UrlError::Scheme);
    }
    let rest = &s[7..];
    let rest = rest.split('#').next().unwrap_or("");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.contains('@') {
        return Err(UrlError::Userinfo);
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    let host: Ipv4Addr = host.parse().map_err(|_| UrlError::Host)?;
    let port = match port {
        None | Some("") => 80,
        Some(p) if p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => match p.parse() {
            Ok(0) | Err(_) => return Err(UrlError::Port),
            Ok(n) => n,
        },
        Some(_) => return Err(UrlError::Port),
    };
    if !path.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Err(UrlError::Path);
    }
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    Ok(Url { host, port, path })
}

/// Why a response couldn't be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpError {
    /// The header section exceeds [`MAX_RESPONSE_HEADER_BYTES`].
    HeaderTooLarge,
    /// Not `HTTP/1.x NNN reason`.
    BadStatusLine,
    /// Not HTTP/1.x.
    BadVersion,
    /// A malformed header field.
    BadHeader,
    /// A malformed or conflicting `Content-Length`.
    BadContentLength,
    /// A malformed chunk-size line or chunk end.
    BadChunk,
    /// A chunk-size line longer than [`MAX_CHUNK_LINE`].
    ChunkLineTooLong,
    /// Trailer fields longer than [`MAX_TRAILER_BYTES`].
    TrailerTooLarge,
    /// 101 Switching Protocols (we never ask for it).
    UnexpectedUpgrade,
    /// The connection ended before the response was complete.
    Truncated,
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HttpError::HeaderTooLarge => "response header section too large",
            HttpError::BadStatusLine => "malformed status line",
            HttpError::BadVersion => "not an HTTP/1.x response",
            HttpError::BadHeader => "malformed response header field",
            HttpError::BadContentLength => "malformed Content-Length",
            HttpError::BadChunk => "malformed chunked body",
            HttpError::ChunkLineTooLong => "chunk-size line too long",
            HttpError::TrailerTooLarge => "trailer section too large",
            HttpError::UnexpectedUpgrade => "unexpected 101 Switching Protocols",
            HttpError::Truncated => "connection closed before the response was complete",
        })
    }
}

impl std::error::Error for HttpError {}

/// The result of one [`HttpGet::feed`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feed<'a> {
    /// Input bytes consumed.
    pub consumed: usize,
    /// Body bytes: a sub-slice of the input (possibly empty).
    pub body: &'a [u8],
}

/// How the response body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

enum CState {
    Head,
    Fixed {
        remaining: u64,
    },
    UntilClose,
    ChunkSize,
    ChunkData {
        remaining: u64,
    },
    /// After a chunk's data: CRLF (or LF).
    ChunkEnd {
        seen_cr: bool,
    },
    /// Trailer section: `line_len` bytes of the current line so far.
    Trailer {
        line_len: usize,
        total: usize,
    },
    Done,
}

/// One `GET` for `lazynet get` (see the module docs).
///
/// Driving it from a socket loop:
///
/// ```text
/// let url = parse_url(arg)?;
/// let mut get = HttpGet::new(&url);
/// connect to (url.host, url.port); send get.request() entirely;
/// loop {
///     match socket.recv(&mut buf) {
///         0 (FIN) => { get.on_eof()?; break }
///         n => { get.feed_all(&buf[..n], |body| out.write_all(body))?; }
///     }
///     if get.is_done() { break }
/// }
/// get.status()  // e.g. exit non-zero unless 2xx
/// ```
pub struct HttpGet {
    request: Vec<u8>,
    head: HeadBuf,
    state: CState,
    status: Option<u16>,
    headers: Vec<(String, String)>,
    framing: Option<Framing>,
    chunk_line: Vec<u8>,
    body_bytes: u64,
}

impl HttpGet {
    pub fn new(url: &Url) -> HttpGet {
        let host = if url.port == 80 {
            url.host.to_string()
        } else {
            format!("{}:{}", url.host, url.port)
        };
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {PRODUCT}\r\nAccept: */*\r\nConnection: close\r\n\r\n",
            url.path
        )
        .into_bytes();
        HttpGet {
            request,
            head: HeadBuf::new(MAX_RESPONSE_HEADER_BYTES),
            state: CState::Head,
            status: None,
            headers: Vec::new(),
            framing: None,
            chunk_line: Vec::new(),
            body_bytes: 0,
        }
    }

    /// The request bytes to send.
    pub fn request(&self) -> &[u8] {
        &self.request
    }

    /// The final status code, once the header section has been parsed.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// The final response's header fields (name as received, value trimmed).
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The first value of header field `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// How the body is delimited, once known.
    pub fn framing(&self) -> Option<Framing> {
        self.framing
    }

    /// Body bytes handed out so far.
    pub fn body_bytes(&self) -> u64 {
        self.body_bytes
    }

    /// The response is complete; further input is ignored.
    pub fn is_done(&self) -> bool {
        matches!(self.state, CState::Done)
    }

    /// Parses response bytes. Returns after at most one body slice; consumes at
    /// least one byte of a non-empty input unless [`is_done`](Self::is_done).
    /// Call again with `&input[consumed..]` until all is consumed (or use
    /// [`feed_all`](Self::feed_all)). After an error the state is undefined.
    pub fn feed<'a>(&mut self, input: &'a [u8]) -> Result<Feed<'a>, HttpError> {
        let mut pos = 0;
        loop {
            if pos == input.len() || self.is_done() {
                return Ok(Feed {
                    consumed: pos,
                    body: &[],
                });
            }
            let rest = &input[pos..];
            match &mut self.state {
                CState::Done => unreachable!(),
                CState::Head => match self.head.push(rest) {
                    HeadStep::NeedMore => pos = input.len(),
                    HeadStep::TooLarge => return Err(HttpError::HeaderTooLarge),
                    HeadStep::Complete(k) => {
                        pos += k;
                        self.on_head()?;
                    }
                },
                CState::Fixed { remaining } => {
                    let k = (*remaining).min(rest.len() as u64) as usize;
                    *remaining -= k as u64;
                    if *remaining == 0 {
                        self.state = CState::Done;
                    }
                    return Ok(self.body(pos, k, input));
                }
                CState::UntilClose => {
                    return Ok(self.body(pos, rest.len(), input));
                }
                CState::ChunkData { remaining } => {
                    let k = (*remaining).min(rest.len() as u64) as usize;
                    *remaining -= k as u64;
                    if *remaining == 0 {
                        self.state = CState::ChunkEnd { seen_cr: false };
                    }
                    return Ok(self.body(pos, k, input));
                }
                CState::ChunkSize => match rest.iter().position(|&b| b == b'\n') {
                    None => {
                        if self.chunk_line.len() + rest.len() > MAX_CHUNK_LINE {
                            return Err(HttpError::ChunkLineTooLong);
                        }
                        self.chunk_line.extend_from_slice(rest);
                        pos = input.len();
                    }
                    Some(i) => {
                        if self.chunk_line.len() + i > MAX_CHUNK_LINE {
                            return Err(HttpError::ChunkLineTooLong);
                        }
                        self.chunk_line.extend_from_slice(&rest[..i]);
                        pos += i + 1;
                        let size = parse_chunk_size(&self.chunk_line)?;
                        self.chunk_line.clear();
                        self.state = if size == 0 {
                            CState::Trailer {
                                line_len: 0,
                                total: 0,
                            }
                        } else {
                            CState::ChunkData { remaining: size }
                        };
                    }
                },
                CState::ChunkEnd { seen_cr } => {
                    match (rest[0], *seen_cr) {
                        (b'\r', false) => *seen_cr = true,
                        (b'\n', _) => self.state = CState::ChunkSize,
                        _ => return Err(HttpError::BadChunk),
                    }
                    pos += 1;
                }
                CState::Trailer { line_len, total } => {
                    // Trailer fields are read and discarded (RFC 9112 §7.1.2).
                    let b = rest[0];
                    pos += 1;
                    *total += 1;
                    if *total > MAX_TRAILER_BYTES {
                        return Err(HttpError::TrailerTooLarge);
                    }
                    match b {
                        b'\n' if *line_len == 0 => self.state = CState::Done,
                        b'\n' => *line_len = 0,
                        b'\r' => {}
                        _ => *line_len += 1,
                    }
                }
            }
        }
    }

    /// Feeds all of `input`, handing body bytes to `sink`; returns the bytes
    /// consumed (less than `input.len()` only once the response is done).
    pub fn feed_all(
        &mut self,
        mut input: &[u8],
        mut sink: impl FnMut(&[u8]),
    ) -> Result<usize, HttpError> {
        let mut total = 0;
        while !input.is_empty() && !self.is_done() {
            let f = self.feed(input)?;
            if !f.body.is_empty() {
                sink(f.body);
            }
            total += f.consumed;
            input = &input[f.consumed..];
        }
        Ok(total)
    }

    /// The server closed the connection: completes a read-until-close body,
    /// otherwise an error unless the response was already complete.
    pub fn on_eof(&mut self) -> Result<(), HttpError> {
        match self.state {
            CState::Done => Ok(()),
            CState::UntilClose => {
                self.state = CState::Done;
                Ok(())
            }
            _ => Err(HttpError::Truncated),
        }
    }

    fn body<'a>(&mut self, pos: usize, k: usize, input: &'a [u8]) -> Feed<'a> {
        self.body_bytes += k as u64;
        Feed {
            consumed: pos + k,
            body: &input[pos..pos + k],
        }
    }

    fn on_head(&mut self) -> Result<(), HttpError> {
        let head = std::mem::take(&mut self.head.buf);
        self.head.clear();
        let lines = split_lines(&head).map_err(|()| HttpError::BadHeader)?;
        let (status_line, fields) = lines.split_first().ok_or(HttpError::BadStatusLine)?;
        // HTTP-version SP 3DIGIT [SP reason-phrase]
        let mut parts = status_line.splitn(3, |&b| b == b' ');
        let version = parts.next().ok_or(HttpError::BadStatusLine)?;
        let code = parts.next().ok_or(HttpError::BadStatusLine)?;
        match parse_version(version) {
            Some((1, _)) => {}
            Some(_) => return Err(HttpError::BadVersion),
            None => return Err(HttpError::BadStatusLine),
        }
        if code.len() != 3 || !code.iter().all(u8::is_ascii_digit) || code[0] == b'0' {
            return Err(HttpError::BadStatusLine);
        }
        let status = code.iter().fold(0u16, |a, &d| a * 10 + u16::from(d - b'0'));
        let mut headers = Vec::with_capacity(fields.len());
        let mut content_length = None;
        let mut te: Option<String> = None;
        for line in fields {
            let (name, value) = parse_field(line).map_err(|()| HttpError::BadHeader)?;
            let name = String::from_utf8_lossy(name).into_owned();
            let value = String::from_utf8_lossy(value).into_owned();
            if name.eq_ignore_ascii_case("content-length") {
                content_length = Some(
                    parse_content_length(value.as_bytes(), content_length)
                        .map_err(|()| HttpError::BadContentLength)?,
                );
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                let t = te.get_or_insert_with(String::new);
                if !t.is_empty() {
                    t.push(',');
                }
                t.push_str(&value);
            }
            headers.push((name, value));
        }
        if (100..200).contains(&status) {
            if status == 101 {
                return Err(HttpError::UnexpectedUpgrade);
            }
            // Interim response: wait for the final one.
            return Ok(());
        }
        self.status = Some(status);
        self.headers = headers;
        let framing = if status == 204 || status == 304 {
            Framing::None
        } else if let Some(te) = te {
            // RFC 9112 §6.3: Transfer-Encoding overrides Content-Length.
            let last = list_items(te.as_bytes()).last().unwrap_or(b"");
            if last.eq_ignore_ascii_case(b"chunked") {
                Framing::Chunked
            } else {
                Framing::UntilClose
            }
        } else {
            match content_length {
                Some(0) => Framing::None,
                Some(n) => Framing::Length(n),
                None => Framing::UntilClose,
            }
        };
        self.framing = Some(framing);
        self.state = match framing {
            Framing::None => CState::Done,
            Framing::Length(n) => CState::Fixed { remaining: n },
            Framing::Chunked => CState::ChunkSize,
            Framing::UntilClose => CState::UntilClose,
        };
        Ok(())
    }
}

/// `chunk-size [chunk-ext]` (CR already allowed at the end): the size.
fn parse_chunk_size(line: &[u8]) -> Result<u64, HttpError> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(HttpError::BadChunk);
    }
    match line.get(digits) {
        None | Some(b';' | b' ' | b'\t') => {}
        Some(_) => return Err(HttpError::BadChunk),
    }
    if line[digits..].contains(&b'\r') {
        return Err(HttpError::BadChunk);
    }
    let mut n: u64 = 0;
    for &d in &line[..digits] {
        let v = (d as char).to_digit(16).unwrap_or(0) as u64;
        n = n
            .checked_mul(16)
            .and_then(|n| n.checked_add(v))
            .ok_or(HttpError::BadChunk)?;
    }
    Ok(n)
}
