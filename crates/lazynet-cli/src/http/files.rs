//! Files under the server's `--root`: from a request path to an open file
//! (see "Files" in the docs of [`super`] for the rules).
//!
//! **Owns:** percent-decoding ([`percent_decode`]), the path under the root
//! and the refusal of traversal ([`resolve_path`]), opening what it names
//! (directories serve `index.html`; symlinks leaving the root, non-regular
//! files and permission errors → 403) and the `Content-Type` by extension
//! ([`content_type`]).
//!
//! **May not touch:** requests, responses or the file cache: it answers with
//! a file or a status code, and the server decides what to send. The only
//! I/O is `stat`, `realpath`, `open` and `fstat` under the root.

use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

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
            _ => p.push(OsStr::from_bytes(seg)),
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
pub(super) fn open_file(
    root: &Path,
    url_path: &[u8],
) -> Result<(File, Metadata, &'static str, PathBuf), u16> {
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
