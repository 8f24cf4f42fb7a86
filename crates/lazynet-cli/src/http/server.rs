//! The server connection: requests in, responses out, in order.
//!
//! **Owns:** [`ServerConfig`] (root, file cache, simulated work) and
//! [`HttpConn`]: buffering request heads ([`MAX_HEADER_BYTES`]), reading and
//! discarding or hashing bodies, the routes (`/bytes/N`, `/upload`, files),
//! method rules (405, 501), keep-alive ([`Persist`]), `100 Continue`,
//! pipelining with at most [`MAX_QUEUED_RESPONSES`] queued responses, and
//! closing after an error.
//!
//! **May not touch:** sockets, time-outs or connection limits (the caller's),
//! the syntax of a head ([`parse`](super::parse)), how a response's bytes
//! are produced ([`response`](super::response)) or which file a path names
//! ([`files`](super::files)).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use sha2::{Digest, Sha256};

use super::cache::{CacheLimits, FileCache};
use super::files::open_file;
use super::parse::{parse_request, HeadBuf, HeadStep, Method};
use super::pattern::hex;
use super::response::{Body, Persist, Response, ResponseBuilder, WriteResult};
use super::work::busy_for;

/// The largest request header section (request line, fields, blank line) the
/// server accepts; larger → 431.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;
/// The largest `N` for `/bytes/N` (1 TiB).
pub const MAX_BYTES_N: u64 = 1 << 40;
/// Responses queued and not yet fully output after which [`HttpConn::feed`]
/// stops consuming input (back-pressure on pipelining clients).
pub const MAX_QUEUED_RESPONSES: usize = 16;

/// Server settings shared by all connections (of one thread: the file
/// cache is not shared across threads).
#[derive(Debug)]
pub struct ServerConfig {
    /// Canonical document root, if files are served.
    root: Option<PathBuf>,
    /// Small files in memory ([`FileCache`]); `None`: off.
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
        self.cache = Some(RefCell::new(FileCache::with_limits(limits)));
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

/// One server connection (see the [`http`](super) docs).
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
        let req = match parse_request(head) {
            Ok(req) => req,
            Err(status) => return self.fail(status),
        };
        let http10 = req.http10;
        let persist = Persist {
            close: req.conn_close || (http10 && !req.conn_keep_alive),
            announce_keep_alive: http10 && req.conn_keep_alive && !req.conn_close,
        };
        let method = req.method;
        let head_only = method == Method::Head;
        let body_len = req.content_length.unwrap_or(0);
        let pending = match self.route(method, &req.target) {
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
        if req.expect_continue && !http10 {
            self.queue.push_back(Response::continue_100());
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
            return Ok(Some(ResponseBuilder::ok(
                "application/octet-stream",
                n,
                Body::Pattern {
                    offset: 0,
                    remaining: n,
                },
            )));
        }
        if !get_like {
            return Ok(Some(ResponseBuilder::allow(405, "GET, HEAD")));
        }
        let Some(root) = self.cfg.root.as_deref() else {
            return Ok(Some(ResponseBuilder::error(404)));
        };
        let cached = |data: Rc<[u8]>, content_type| {
            ResponseBuilder::ok(
                content_type,
                data.len() as u64,
                Body::Shared { data, pos: 0 },
            )
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
                        ResponseBuilder::ok(
                            content_type,
                            len,
                            Body::File {
                                file,
                                remaining: len,
                            },
                        )
                    }
                }
            }
            Err(status) => ResponseBuilder::error(status),
        }))
    }
}
