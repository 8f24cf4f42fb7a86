//! The client side of `lazynet get`: one `GET`, its response parsed as it
//! streams in.
//!
//! **Owns:** [`HttpGet`] (the request bytes, the response's state machine,
//! body framing per RFC 9112 §6.3, chunked decoding per §7.1 with bounded
//! chunk-size lines and trailers) and its errors ([`HttpError`]).
//!
//! **May not touch:** sockets, name resolution or the output: bytes come in
//! through [`HttpGet::feed`] and body bytes go back out as sub-slices of
//! them. The status line and fields are read by
//! [`parse_response`].

use std::fmt;

use super::parse::{parse_response, HeadBuf, HeadStep};
use super::url::Url;
use super::PRODUCT;

/// The largest response header section the client accepts.
pub const MAX_RESPONSE_HEADER_BYTES: usize = 64 * 1024;
/// The longest chunk-size line (with extensions) the client accepts.
pub const MAX_CHUNK_LINE: usize = 4096;
/// The most trailer bytes after the last chunk the client accepts.
pub const MAX_TRAILER_BYTES: usize = 8 * 1024;

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

/// One `GET` for `lazynet get` (see the [`http`](super) docs).
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
        let head = parse_response(&head)?;
        let status = head.status;
        if (100..200).contains(&status) {
            if status == 101 {
                return Err(HttpError::UnexpectedUpgrade);
            }
            // Interim response: wait for the final one.
            return Ok(());
        }
        self.status = Some(status);
        self.headers = head.headers;
        let framing = if status == 204 || status == 304 {
            Framing::None
        } else if let Some(chunked) = head.te_chunked {
            // RFC 9112 §6.3: Transfer-Encoding overrides Content-Length.
            if chunked {
                Framing::Chunked
            } else {
                Framing::UntilClose
            }
        } else {
            match head.content_length {
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
