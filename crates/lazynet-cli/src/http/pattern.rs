//! The `/bytes/N` content: byte `i` is `(i % 251) as u8` (see the module
//! docs of [`super`] for the same bytes and digests from Python).
//!
//! **Owns:** the pattern ([`pattern_byte`]), filling buffers with it
//! ([`pattern_fill`]), its SHA-256 ([`pattern_sha256`]) and the hex used to
//! print digests ([`hex`]).
//!
//! **May not touch:** anything of HTTP: no requests, responses or I/O.

use sha2::{Digest, Sha256};

const PERIOD: usize = 251;
/// A whole number of periods, so copies can run long before wrapping.
pub(super) const TABLE_LEN: usize = PERIOD * 64;
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
