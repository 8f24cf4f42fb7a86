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
//! # Layout
//!
//! | module       | owns |
//! |--------------|------|
//! | `pattern`    | the `/bytes/N` content and hex |
//! | `parse`      | header sections: their end, and request and response heads read with `httparse` |
//! | `server`     | [`ServerConfig`], [`HttpConn`] and its routes |
//! | `response`   | response heads and body sources |
//! | `files`      | paths under `--root`, opening them, `Content-Type` |
//! | `cache`      | [`FileCache`] |
//! | `work`       | the lab's simulated per-request work |
//! | `url`        | [`Url`], [`parse_url`] |
//! | `client`     | [`HttpGet`] |
//!
//! Every public item is re-exported here: users name `http::X`, never a
//! submodule.
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
//! entry used longest ago makes room. Larger files stream from an open file.
//! Consequently responses carry no `Date` header (RFC 9110
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
//! Heads are tokenized by `httparse`, with the few checks it doesn't make
//! beside it (the `parse` module says which, and why `httparse`).
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

mod cache;
mod client;
mod files;
mod parse;
mod pattern;
mod response;
mod server;
mod url;
mod work;

#[cfg(test)]
mod tests;

pub use cache::{
    CacheLimits, FileCache, CACHE_MAX_BYTES, CACHE_MAX_ENTRIES, CACHE_MAX_FILE, CACHE_VALID,
};
pub use client::{
    Feed, Framing, HttpError, HttpGet, MAX_CHUNK_LINE, MAX_RESPONSE_HEADER_BYTES, MAX_TRAILER_BYTES,
};
pub use files::{content_type, percent_decode, resolve_path};
pub use pattern::{hex, pattern_byte, pattern_fill, pattern_sha256};
pub use server::{HttpConn, ServerConfig, MAX_BYTES_N, MAX_HEADER_BYTES, MAX_QUEUED_RESPONSES};
pub use url::{parse_url, Url, UrlError};

/// `lazynet/VERSION`, used as `Server` and `User-Agent`.
pub const PRODUCT: &str = concat!("lazynet/", env!("CARGO_PKG_VERSION"));
