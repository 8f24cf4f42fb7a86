//! `http://` URLs for `lazynet get`.
//!
//! **Owns:** [`Url`] and [`parse_url`]: scheme, IPv4-literal host, port,
//! path and query (fragment dropped).
//!
//! **May not touch:** name resolution, sockets or the request itself (that
//! is [`HttpGet`](super::HttpGet)'s).

use std::fmt;
use std::net::Ipv4Addr;

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
