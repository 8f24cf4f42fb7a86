//! Server responses: a head of a few hundred bytes and a body produced on
//! demand, never held whole unless it already is in memory.
//!
//! **Owns:** building a response head ([`ResponseBuilder`]: status line,
//! `Server`, `Content-Type`, `Content-Length`, extra fields, `Connection`
//! per [`Persist`]) and writing a response into the caller's buffer
//! ([`Response::write`]) from its body source ([`Body`]: memory, the
//! `/bytes/N` pattern, an open file, a cached file).
//!
//! **May not touch:** requests, routing or the queue of a connection: which
//! response to send, and when, is [`HttpConn`](super::HttpConn)'s.

use std::fs::File;
use std::io::{self, Read};
use std::rc::Rc;

use super::pattern::pattern_fill;
use super::PRODUCT;

/// Where response body bytes come from.
pub(super) enum Body {
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
pub(super) struct Response {
    head: Vec<u8>,
    head_pos: usize,
    body: Body,
    /// The connection ends after this response.
    pub(super) close: bool,
}

pub(super) enum WriteResult {
    /// More to write.
    Partial,
    Finished,
    /// The body source failed (file shrank or a read error): close now.
    Failed,
}

impl Response {
    /// The interim `100 Continue` (RFC 9110 §15.2.1).
    pub(super) fn continue_100() -> Response {
        Response {
            head: b"HTTP/1.1 100 Continue\r\n\r\n".to_vec(),
            head_pos: 0,
            body: Body::Empty,
            close: false,
        }
    }

    /// Writes as much as fits into `out[*n..]`, advancing `*n`.
    pub(super) fn write(&mut self, out: &mut [u8], n: &mut usize) -> WriteResult {
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
pub(super) struct Persist {
    /// The connection ends after this response.
    pub(super) close: bool,
    /// HTTP/1.0 keep-alive: say so in the response.
    pub(super) announce_keep_alive: bool,
}

impl Persist {
    pub(super) const CLOSE: Persist = Persist {
        close: true,
        announce_keep_alive: false,
    };
}

/// A response before its head is written: what [`build`](Self::build) needs.
pub(super) struct ResponseBuilder {
    status: u16,
    content_type: &'static str,
    extra: Vec<(&'static str, String)>,
    len: u64,
    body: Body,
}

impl ResponseBuilder {
    /// 200 with `len` bytes from `body`.
    pub(super) fn ok(content_type: &'static str, len: u64, body: Body) -> ResponseBuilder {
        ResponseBuilder {
            status: 200,
            content_type,
            extra: Vec::new(),
            len,
            body,
        }
    }

    pub(super) fn text(status: u16, text: String) -> ResponseBuilder {
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

    pub(super) fn error(status: u16) -> ResponseBuilder {
        Self::text(status, format!("{status} {}\n", reason(status)))
    }

    pub(super) fn allow(status: u16, allow: &'static str) -> ResponseBuilder {
        let mut r = Self::error(status);
        r.extra.push(("Allow", allow.to_string()));
        r
    }

    /// The response, without its body for a HEAD (`head_only`).
    pub(super) fn build(self, head_only: bool, persist: Persist) -> Response {
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
