use super::pattern::TABLE_LEN;
use super::*;

use proptest::prelude::*;
use sha2::{Digest, Sha256};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

// ---------------------------------------------------------------- helpers

fn conn() -> HttpConn {
    HttpConn::new(Rc::new(ServerConfig::new(None).unwrap()))
}

fn conn_root(root: &Path) -> HttpConn {
    HttpConn::new(Rc::new(ServerConfig::new(Some(root)).unwrap()))
}

/// Feeds everything (retrying after draining output when back-pressured),
/// then drains all output with a small buffer.
fn run(c: &mut HttpConn, chunks: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 333];
    for chunk in chunks {
        let mut rest = *chunk;
        while !rest.is_empty() {
            let used = c.feed(rest);
            rest = &rest[used..];
            if used == 0 {
                let n = c.poll_output(&mut buf);
                assert!(n > 0, "feed stalled with nothing to output");
                out.extend_from_slice(&buf[..n]);
            }
        }
    }
    loop {
        let n = c.poll_output(&mut buf);
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

fn serve(input: &[u8]) -> (Vec<u8>, bool) {
    let mut c = conn();
    let out = run(&mut c, &[input]);
    (out, c.wants_close())
}

#[derive(Debug, PartialEq)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Splits server output into responses; `head_only[i]` says response i (not
/// counting 100s) answers a HEAD.
fn responses(mut out: &[u8], head_only: &[bool]) -> Vec<Resp> {
    let mut v = Vec::new();
    let mut i = 0;
    while !out.is_empty() {
        let end = out
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("incomplete head")
            + 4;
        let head = std::str::from_utf8(&out[..end]).unwrap();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        assert!(status_line.starts_with("HTTP/1.1 "), "{status_line}");
        let status: u16 = status_line[9..12].parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (k, v) = l.split_once(": ").unwrap();
                (k.to_string(), v.to_string())
            })
            .collect();
        out = &out[end..];
        let mut r = Resp {
            status,
            headers,
            body: Vec::new(),
        };
        if status != 100 {
            let len: usize = r.header("content-length").unwrap().parse().unwrap();
            if !head_only.get(i).copied().unwrap_or(false) {
                r.body = out[..len].to_vec();
                out = &out[len..];
            }
            i += 1;
        }
        v.push(r);
    }
    v
}

fn one(input: &[u8]) -> (Resp, bool) {
    let (out, close) = serve(input);
    let mut r = responses(&out, &[input.starts_with(b"HEAD")]);
    assert_eq!(r.len(), 1, "{}", String::from_utf8_lossy(&out));
    (r.remove(0), close)
}

fn status_of(input: &[u8]) -> u16 {
    one(input).0.status
}

static DIRS: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory tree:
/// root/index.html, root/a.txt, root/sub/index.html, root/empty/, root/big.bin,
/// outside/secret.txt, root/link -> ../outside
struct Tree {
    base: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let base = std::env::temp_dir().join(format!(
            "lazynet-http-test-{}-{}",
            std::process::id(),
            DIRS.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(root.join("empty")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        std::fs::write(root.join("index.html"), b"<h1>root</h1>\n").unwrap();
        std::fs::write(root.join("a.txt"), b"hello a\n").unwrap();
        std::fs::write(root.join("sp ace.txt"), b"space\n").unwrap();
        std::fs::write(root.join("sub/index.html"), b"<h1>sub</h1>\n").unwrap();
        let big: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 256) as u8).collect();
        std::fs::write(root.join("big.bin"), &big).unwrap();
        std::fs::write(base.join("outside/secret.txt"), b"secret\n").unwrap();
        std::os::unix::fs::symlink("../outside", root.join("link")).unwrap();
        Tree { base }
    }

    fn root(&self) -> PathBuf {
        self.base.join("root")
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes()
}

// ---------------------------------------------------------------- pattern

#[test]
fn pattern_fill_matches_pattern_byte() {
    for offset in [
        0u64,
        1,
        250,
        251,
        252,
        1000,
        TABLE_LEN as u64 - 3,
        u64::MAX - 50_000,
    ] {
        for len in [
            0usize,
            1,
            250,
            251,
            252,
            TABLE_LEN - 1,
            TABLE_LEN + 7,
            40_000,
        ] {
            let mut buf = vec![0xAAu8; len];
            pattern_fill(offset, &mut buf);
            for (i, &b) in buf.iter().enumerate() {
                assert_eq!(
                    b,
                    pattern_byte(offset.wrapping_add(i as u64)),
                    "offset {offset} i {i}"
                );
            }
        }
    }
}

#[test]
fn pattern_sha256_known_values() {
    // Independently: sha256 of bytes(range(251)) * k, computed byte by byte.
    for n in [0u64, 1, 250, 251, 252, 16_064, 16_065, 100_000] {
        let mut h = Sha256::new();
        for i in 0..n {
            h.update([pattern_byte(i)]);
        }
        let want: [u8; 32] = h.finalize().into();
        assert_eq!(pattern_sha256(n), want, "n {n}");
    }
    // sha256 of the empty string.
    assert_eq!(
        hex(&pattern_sha256(0)),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    // python3 -c 'import hashlib;print(hashlib.sha256(bytes(range(251))[:3]).hexdigest())'
    // = sha256 of 00 01 02
    assert_eq!(
        hex(&pattern_sha256(3)),
        "ae4b3280e56e2faf83f414a6e3dabe9d5fbe18976544c05fed121accb85b53fc"
    );
    // From the Python one-liner in the module docs.
    assert_eq!(
        hex(&pattern_sha256(1000)),
        "4e4c294b331f7a2099a379bec34b9f9fc03dc46ab465d998f4d683da53487e6d"
    );
    assert_eq!(
        hex(&pattern_sha256(2_000_000)),
        "82fa05417c03925cb7e8fd2bc2e9f2e2a1c8c421427ccdba1ab0091261e3a840"
    );
}

// ---------------------------------------------------------------- /bytes/N

#[test]
fn bytes_n_content_and_length() {
    for n in [0u64, 1, 251, 1000, 70_000] {
        let (r, close) = one(&get(&format!("/bytes/{n}")));
        assert_eq!(r.status, 200);
        assert!(!close);
        assert_eq!(r.header("content-length"), Some(n.to_string().as_str()));
        assert_eq!(r.header("content-type"), Some("application/octet-stream"));
        assert_eq!(r.body.len() as u64, n);
        let mut want = vec![0; n as usize];
        pattern_fill(0, &mut want);
        assert_eq!(r.body, want);
        let digest: [u8; 32] = Sha256::digest(&r.body).into();
        assert_eq!(digest, pattern_sha256(n));
    }
}

#[test]
fn bytes_huge_n_constant_memory() {
    let mut c = conn();
    let req = get(&format!("/bytes/{MAX_BYTES_N}"));
    assert_eq!(c.feed(&req), req.len());
    let mut buf = vec![0u8; 64 * 1024];
    let n = c.poll_output(&mut buf);
    assert_eq!(n, buf.len());
    let text = String::from_utf8_lossy(&buf[..200]).into_owned();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains(&format!("Content-Length: {MAX_BYTES_N}\r\n")));
    let body_start = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut off = 0u64;
    for &b in &buf[body_start..] {
        assert_eq!(b, pattern_byte(off));
        off += 1;
    }
    // A few more chunks continue the pattern.
    for _ in 0..10 {
        let n = c.poll_output(&mut buf);
        assert_eq!(n, buf.len());
        for &b in &buf[..n] {
            assert_eq!(b, pattern_byte(off));
            off += 1;
        }
    }
    assert!(c.has_output());
    assert!(!c.wants_close());
}

#[test]
fn bytes_n_bad() {
    assert_eq!(status_of(&get("/bytes/")), 404);
    assert_eq!(status_of(&get("/bytes/12x")), 404);
    assert_eq!(status_of(&get("/bytes/-1")), 404);
    assert_eq!(status_of(&get(&format!("/bytes/{}", MAX_BYTES_N + 1))), 400);
    assert_eq!(status_of(&get("/bytes/99999999999999999999")), 400);
    assert_eq!(status_of(&get("/bytes/999999999999999999999")), 404);
    let (r, _) = one(b"POST /bytes/5 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD"));
    // Query strings are ignored.
    assert_eq!(one(&get("/bytes/3?x=1")).0.body, vec![0, 1, 2]);
}

#[test]
fn head_has_no_body_but_length() {
    let (r, close) = one(b"HEAD /bytes/12345 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 200);
    assert!(!close);
    assert_eq!(r.header("content-length"), Some("12345"));
    assert!(r.body.is_empty());
    // HEAD then GET pipelined: the GET's body follows the HEAD's head directly.
    let (out, _) = serve(
        b"HEAD /bytes/10 HTTP/1.1\r\nHost: x\r\n\r\nGET /bytes/4 HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let rs = responses(&out, &[true, false]);
    assert_eq!(rs.len(), 2);
    assert_eq!(rs[1].body, vec![0, 1, 2, 3]);
    // HEAD of a 404 has no body either.
    let (r, _) = one(b"HEAD /nope HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 404);
    assert!(r.body.is_empty());
}

// ---------------------------------------------------------------- request parsing

#[test]
fn byte_by_byte_equals_whole() {
    let req: &[u8] = b"GET /bytes/300 HTTP/1.1\r\nHost: a\r\nX-Long: aaaaaaaaaaaaaaaa\r\n\r\nHEAD /bytes/1 HTTP/1.1\r\nhost: b\r\n\r\nPOST /upload HTTP/1.1\r\nHost: c\r\nContent-Length: 5\r\n\r\nhelloGET /x HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n";
    let (whole, close) = serve(req);
    assert!(close);
    let mut c = conn();
    let chunks: Vec<&[u8]> = req.chunks(1).collect();
    let split = run(&mut c, &chunks);
    assert_eq!(split, whole);
    assert!(c.wants_close());
    let rs = responses(&whole, &[false, true, false, false]);
    assert_eq!(
        rs.iter().map(|r| r.status).collect::<Vec<_>>(),
        [200, 200, 200, 404]
    );
    assert_eq!(c.requests(), 4);
}

#[test]
fn lf_only_lines_and_leading_empty_lines() {
    let (r, _) = one(b"\r\n\r\nGET /bytes/2 HTTP/1.1\nHost: x\n\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, vec![0, 1]);
    let (r, _) = one(b"\nGET /bytes/2 HTTP/1.1\r\nHost: x\n\r\n");
    assert_eq!(r.status, 200);
}

#[test]
fn header_names_case_insensitive() {
    let (r, close) = one(b"GET /bytes/1 HTTP/1.1\r\nhOsT: x\r\ncOnNeCtIoN: ClOsE\r\n\r\n");
    assert_eq!(r.status, 200);
    assert!(close);
    assert_eq!(r.header("connection"), Some("close"));
}

#[test]
fn bad_request_lines() {
    for req in [
        &b"GET /bytes/1\r\nHost: x\r\n\r\n"[..],
        b"GET  /bytes/1 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /bytes/1 HTTP/1.1 \r\nHost: x\r\n\r\n",
        b"GET /bytes/1 http/1.1\r\nHost: x\r\n\r\n",
        b"GET /bytes/1 HTTP/1\r\nHost: x\r\n\r\n",
        b"GET /bytes/1 HTTP/1.10\r\nHost: x\r\n\r\n",
        b"GE(T /bytes/1 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET bytes/1 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /by\x01tes HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /a\rb HTTP/1.1\r\nHost: x\r\n\r\n",
        b"\x00\r\n\r\n",
    ] {
        let (r, close) = one(req);
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(req));
        assert!(close);
        assert_eq!(r.header("connection"), Some("close"));
    }
}

#[test]
fn versions() {
    for v in ["HTTP/2.0", "HTTP/0.9", "HTTP/3.1"] {
        let (r, close) = one(format!("GET /bytes/1 {v}\r\nHost: x\r\n\r\n").as_bytes());
        assert_eq!(r.status, 505, "{v}");
        assert!(close);
    }
    // HTTP/1.x, x > 1, is answered as 1.1 (persistent).
    let (r, close) = one(b"GET /bytes/1 HTTP/1.7\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 200);
    assert!(!close);
}

#[test]
fn bad_header_fields() {
    for req in [
        &b"GET /bytes/1 HTTP/1.1\r\nHost : x\r\n\r\n"[..],
        b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n",
        b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n",
        b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\n: empty\r\n\r\n",
        b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nX: a\x01b\r\n\r\n",
        b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n",
        b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n",
        b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 2\r\n\r\n",
        b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
    ] {
        let (r, close) = one(req);
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(req));
        assert!(close);
    }
    // Identical Content-Length values are accepted.
    let (r, _) = one(
        b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\nabc",
    );
    assert_eq!(r.status, 200);
    assert!(r.body.starts_with(b"bytes=3 "));
}

#[test]
fn host_rules() {
    // RFC 9112 §3.2: HTTP/1.1 without Host → 400.
    let (r, close) = one(b"GET /bytes/1 HTTP/1.1\r\n\r\n");
    assert_eq!(r.status, 400);
    assert!(close);
    // Two Hosts → 400.
    assert_eq!(
        status_of(b"GET /bytes/1 HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
        400
    );
    assert_eq!(
        status_of(b"GET /bytes/1 HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n"),
        400
    );
    // HTTP/1.0 may omit it; an empty Host is allowed.
    assert_eq!(status_of(b"GET /bytes/1 HTTP/1.0\r\n\r\n"), 200);
    assert_eq!(status_of(b"GET /bytes/1 HTTP/1.1\r\nHost:\r\n\r\n"), 200);
}

#[test]
fn absolute_form_target() {
    let (r, _) = one(b"GET http://10.0.0.1:8080/bytes/3 HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, vec![0, 1, 2]);
    assert_eq!(status_of(b"GET * HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
    assert_eq!(status_of(b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"), 501);
}

#[test]
fn oversize_headers() {
    // Exactly MAX_HEADER_BYTES is accepted.
    let base = "GET /bytes/1 HTTP/1.1\r\nHost: x\r\nX: \r\n\r\n".len();
    let fill = "a".repeat(MAX_HEADER_BYTES - base);
    let req = format!("GET /bytes/1 HTTP/1.1\r\nHost: x\r\nX: {fill}\r\n\r\n");
    assert_eq!(req.len(), MAX_HEADER_BYTES);
    assert_eq!(status_of(req.as_bytes()), 200);
    // One more byte → 431 and close, also fed byte by byte.
    let req = format!("GET /bytes/1 HTTP/1.1\r\nHost: x\r\nX: a{fill}\r\n\r\n");
    let (r, close) = one(req.as_bytes());
    assert_eq!(r.status, 431);
    assert!(close);
    let mut c = conn();
    let chunks: Vec<&[u8]> = req.as_bytes().chunks(1).collect();
    let out = run(&mut c, &chunks);
    assert_eq!(responses(&out, &[false])[0].status, 431);
    assert!(c.wants_close());
    // A never-ending request line too.
    let mut c = conn();
    let junk = vec![b'A'; 100_000];
    assert_eq!(c.feed(&junk), junk.len());
    let out = run(&mut c, &[]);
    assert_eq!(responses(&out, &[false])[0].status, 431);
}

#[test]
fn keep_alive_rules() {
    let cases: &[(&[u8], bool, Option<&str>)] = &[
        (b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\n\r\n", false, None),
        (
            b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            true,
            Some("close"),
        ),
        (
            b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nConnection: foo, Close\r\n\r\n",
            true,
            Some("close"),
        ),
        (
            b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n",
            false,
            None,
        ),
        (b"GET /bytes/1 HTTP/1.0\r\n\r\n", true, Some("close")),
        (
            b"GET /bytes/1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            false,
            Some("keep-alive"),
        ),
        (
            b"GET /bytes/1 HTTP/1.0\r\nConnection: Keep-Alive, close\r\n\r\n",
            true,
            Some("close"),
        ),
    ];
    for (req, close, header) in cases {
        let (r, c) = one(req);
        assert_eq!(r.status, 200);
        assert_eq!(c, *close, "{}", String::from_utf8_lossy(req));
        assert_eq!(
            r.header("connection"),
            *header,
            "{}",
            String::from_utf8_lossy(req)
        );
    }
}

#[test]
fn wants_close_only_after_output() {
    let mut c = conn();
    c.feed(b"GET /bytes/100 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(!c.wants_close());
    let mut buf = [0u8; 50];
    while !c.wants_close() {
        assert!(c.poll_output(&mut buf) > 0);
    }
    assert_eq!(c.poll_output(&mut buf), 0);
    assert!(!c.has_output());
}

#[test]
fn pipelining_in_order_and_after_close_ignored() {
    let mut req = Vec::new();
    for n in 0..40 {
        req.extend_from_slice(&get(&format!("/bytes/{n}")));
    }
    req.extend_from_slice(b"GET /bytes/7 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    req.extend_from_slice(&get("/bytes/9")); // after close: ignored
    let mut c = conn();
    // Back-pressure: not everything is consumed at once.
    let used = c.feed(&req);
    assert!(used < req.len());
    let out = run(&mut c, &[&req[used..]]);
    let mut all = Vec::new();
    let mut c2 = conn();
    all.extend(run(&mut c2, &[&req]));
    assert!(c2.wants_close());
    let rs = responses(&all, &[]);
    assert_eq!(rs.len(), 41);
    for (n, r) in rs.iter().enumerate().take(40) {
        assert_eq!(r.body.len(), n);
        assert_eq!(r.header("connection"), None);
    }
    assert_eq!(rs[40].body.len(), 7);
    assert_eq!(rs[40].header("connection"), Some("close"));
    assert!(c.wants_close());
    assert!(!out.is_empty());
    // Input after the close is consumed and ignored.
    assert_eq!(c2.feed(b"GET / HTTP/1.1\r\n\r\n"), 18);
    assert_eq!(c2.poll_output(&mut [0u8; 100]), 0);
}

#[test]
fn bad_request_stops_pipeline() {
    let (out, close) =
        serve(b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\n\r\nBROKEN\r\n\r\nGET /bytes/1 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(close);
    let rs = responses(&out, &[]);
    assert_eq!(rs.iter().map(|r| r.status).collect::<Vec<_>>(), [200, 400]);
}

#[test]
fn methods() {
    let (r, close) = one(b"DELETE /bytes/1 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 501);
    assert!(!close);
    let (r, _) = one(b"GET /upload HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("POST, PUT"));
    let (r, _) = one(b"PUT /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab");
    assert_eq!(r.status, 405);
    // Lower-case methods are different (case-sensitive) methods.
    assert_eq!(status_of(b"get /bytes/1 HTTP/1.1\r\nHost: x\r\n\r\n"), 501);
}

#[test]
fn body_of_non_upload_is_skipped() {
    let (out, close) = serve(
        b"GET /bytes/2 HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nGET /nope GET /bytes/3 HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert!(!close);
    let rs = responses(&out, &[]);
    assert_eq!(rs.len(), 2);
    assert_eq!(rs[0].body, vec![0, 1]);
    assert_eq!(rs[1].body, vec![0, 1, 2]);
}

// ---------------------------------------------------------------- uploads

#[test]
fn upload_sha256() {
    let body: Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 253) as u8).collect();
    let want = format!(
        "bytes={} sha256={}\n",
        body.len(),
        hex(&Sha256::digest(&body))
    );
    for method in ["POST", "PUT"] {
        let mut req = format!(
            "{method} /upload HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(&body);
        req.extend_from_slice(&get("/bytes/1"));
        for step in [1usize, 7, 1000, usize::MAX] {
            let mut c = conn();
            let chunks: Vec<&[u8]> = if step == usize::MAX {
                vec![&req]
            } else {
                req.chunks(step).collect()
            };
            let out = run(&mut c, &chunks);
            let rs = responses(&out, &[]);
            assert_eq!(rs.len(), 2);
            assert_eq!(rs[0].status, 200);
            assert_eq!(String::from_utf8_lossy(&rs[0].body), want);
            assert_eq!(rs[1].body, vec![0]);
        }
    }
    // Empty upload, and without Content-Length.
    let empty = "bytes=0 sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n";
    let (r, _) = one(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(String::from_utf8_lossy(&r.body), empty);
    let (r, _) = one(b"POST /upload HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(String::from_utf8_lossy(&r.body), empty);
}

#[test]
fn upload_expect_continue() {
    let (out, _) = serve(
        b"POST /upload HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    );
    assert!(out.starts_with(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"));
    // The 100 comes before the body is read.
    let mut c = conn();
    c.feed(b"PUT /upload HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
    let mut buf = [0u8; 200];
    let n = c.poll_output(&mut buf);
    assert_eq!(&buf[..n], b"HTTP/1.1 100 Continue\r\n\r\n");
    // No 100 for HTTP/1.0 or an empty body.
    let (out, _) =
        serve(b"POST /upload HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx");
    assert!(out.starts_with(b"HTTP/1.1 200"));
}

#[test]
fn chunked_request_body_rejected() {
    let (r, close) = one(b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    assert_eq!(r.status, 411);
    assert!(close);
    let (r, close) = one(b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n");
    assert_eq!(r.status, 501);
    assert!(close);
    let (r, close) = one(b"POST /upload HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(r.status, 400);
    assert!(close);
    let (r, _) = one(b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc");
    assert_eq!(r.status, 411);
}

#[test]
fn eof_mid_request_closes_without_answer() {
    let mut c = conn();
    c.feed(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
    assert!(!c.wants_close());
    c.on_eof();
    assert!(c.wants_close());
    assert_eq!(c.poll_output(&mut [0u8; 100]), 0);
    // EOF after complete requests: answer them, then close.
    let mut c = conn();
    c.feed(&get("/bytes/5"));
    c.on_eof();
    assert!(!c.wants_close());
    let out = run(&mut c, &[]);
    assert_eq!(responses(&out, &[])[0].body.len(), 5);
    assert!(c.wants_close());
}

// ---------------------------------------------------------------- files

#[test]
fn files_served() {
    let t = Tree::new();
    let mut c = conn_root(&t.root());
    let req = [
        get("/a.txt"),
        get("/"),
        get("/sub/"),
        get("/sub"),
        get("/big.bin"),
        get("/sp%20ace.txt"),
        get("/./a.txt"),
        get("//a.txt"),
        get("/missing"),
        get("/empty/"),
        get("/a.txt/"),
    ]
    .concat();
    let out = run(&mut c, &[&req]);
    let rs = responses(&out, &[]);
    let st: Vec<u16> = rs.iter().map(|r| r.status).collect();
    assert_eq!(st, [200, 200, 200, 200, 200, 200, 200, 200, 404, 404, 404]);
    assert_eq!(rs[0].body, b"hello a\n");
    assert_eq!(
        rs[0].header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(rs[1].body, b"<h1>root</h1>\n");
    assert_eq!(
        rs[1].header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(rs[2].body, b"<h1>sub</h1>\n");
    assert_eq!(rs[3].body, b"<h1>sub</h1>\n");
    assert_eq!(rs[4].body, std::fs::read(t.root().join("big.bin")).unwrap());
    assert_eq!(
        rs[4].header("content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(rs[5].body, b"space\n");
    // HEAD of a file.
    let (out, _) = {
        let mut c = conn_root(&t.root());
        (
            run(&mut c, &[b"HEAD /big.bin HTTP/1.1\r\nHost: x\r\n\r\n"]),
            (),
        )
    };
    let r = &responses(&out, &[true])[0];
    assert_eq!(r.header("content-length"), Some("100000"));
    assert!(r.body.is_empty());
}

#[test]
fn path_traversal_rejected() {
    let t = Tree::new();
    for (path, want) in [
        ("/../outside/secret.txt", 403),
        ("/sub/../../outside/secret.txt", 403),
        ("/sub/../a.txt", 403),
        ("/%2e%2e/outside/secret.txt", 403),
        ("/%2E%2E%2Foutside%2Fsecret.txt", 403),
        ("/..%2foutside/secret.txt", 403),
        ("/.%2e/outside/secret.txt", 403),
        ("/..", 403),
        ("/link/secret.txt", 403), // symlink leaving the root
        ("/a.txt%00.html", 400),
        ("/%00", 400),
        ("/%zz", 400),
        ("/%2", 400),
        ("/%252e%252e/outside/secret.txt", 404), // decoded once: a literal name
        ("/etc/passwd", 404),
        ("//etc/passwd", 404),
        ("http://x/../outside/secret.txt", 403),
    ] {
        let mut c = conn_root(&t.root());
        let out = run(&mut c, &[&get(path)]);
        let rs = responses(&out, &[]);
        assert_eq!(rs[0].status, want, "{path}");
        assert!(
            !String::from_utf8_lossy(&rs[0].body).contains("secret"),
            "{path}"
        );
    }
    // A plain ".." target is 400 because it's not origin-form.
    assert_eq!(status_of(&get("..")), 400);
}

#[test]
fn resolve_path_pure() {
    let root = Path::new("/srv");
    assert_eq!(resolve_path(root, b"/a/b").unwrap(), Path::new("/srv/a/b"));
    assert_eq!(
        resolve_path(root, b"///a//./b/").unwrap(),
        Path::new("/srv/a/b")
    );
    assert_eq!(resolve_path(root, b"/").unwrap(), Path::new("/srv"));
    assert_eq!(resolve_path(root, b"/a/%2E%2e/b"), Err(403));
    assert_eq!(resolve_path(root, b"/a%00"), Err(400));
    assert_eq!(percent_decode(b"%41%4a%4A+b").unwrap(), b"AJJ+b");
    assert_eq!(percent_decode(b"%4"), None);
}

#[test]
fn no_root_means_404() {
    assert_eq!(status_of(&get("/")), 404);
    assert_eq!(status_of(&get("/index.html")), 404);
}

#[test]
fn file_shrinking_closes() {
    // Streamed from the file (uncached): its end comes too early.
    let t = Tree::new();
    let cfg = ServerConfig::new(Some(&t.root())).unwrap().without_cache();
    let mut c = HttpConn::new(Rc::new(cfg));
    c.feed(&get("/big.bin"));
    let mut buf = [0u8; 1000];
    assert_eq!(c.poll_output(&mut buf), 1000);
    std::fs::OpenOptions::new()
        .write(true)
        .open(t.root().join("big.bin"))
        .unwrap()
        .set_len(10)
        .unwrap();
    while c.poll_output(&mut buf) > 0 {}
    assert!(c.wants_close());
}

/// One request for `path` on a connection of `cfg`: (status, body).
fn get_on(cfg: &Rc<ServerConfig>, path: &str) -> (u16, Vec<u8>) {
    let mut c = HttpConn::new(cfg.clone());
    let out = run(&mut c, &[&get(path)]);
    let r = responses(&out, &[]).remove(0);
    (r.status, r.body)
}

#[test]
fn cached_files_are_served_from_memory_and_follow_changes() {
    let t = Tree::new();
    let limits = CacheLimits {
        valid: std::time::Duration::ZERO, // revalidate on every hit
        ..CacheLimits::default()
    };
    let cfg = Rc::new(
        ServerConfig::new(Some(&t.root()))
            .unwrap()
            .with_cache(limits),
    );
    let big = std::fs::read(t.root().join("big.bin")).unwrap();
    for _ in 0..3 {
        assert_eq!(get_on(&cfg, "/big.bin"), (200, big.clone()));
        assert_eq!(
            get_on(&cfg, "/a.txt"),
            (
                200,
                b"hello a
"
                .to_vec()
            )
        );
    }
    assert_eq!(cfg.cache_counters(), Some((4, 2, 2, big.len() as u64 + 8)));
    // Rewritten (another size): the next hit reloads it.
    std::fs::write(
        t.root().join("a.txt"),
        b"hello again
",
    )
    .unwrap();
    assert_eq!(
        get_on(&cfg, "/a.txt"),
        (
            200,
            b"hello again
"
            .to_vec()
        )
    );
    // Removed: 404, and the entry is gone.
    std::fs::remove_file(t.root().join("a.txt")).unwrap();
    assert_eq!(get_on(&cfg, "/a.txt").0, 404);
    assert_eq!(cfg.cache_counters().unwrap().2, 1);
    // HEAD of a cached file: its length, no body.
    let mut c = HttpConn::new(cfg.clone());
    let out = run(&mut c, &[b"HEAD /big.bin HTTP/1.1\r\nHost: x\r\n\r\n"]);
    let r = &responses(&out, &[true])[0];
    assert_eq!(r.header("content-length"), Some("100000"));
    assert!(r.body.is_empty());
}

#[test]
fn the_file_cache_keeps_its_bounds() {
    let t = Tree::new();
    for i in 0..10 {
        std::fs::write(t.root().join(format!("f{i}")), vec![i as u8; 1000]).unwrap();
    }
    let limits = CacheLimits {
        max_file: 50_000,
        max_bytes: 3_500,
        max_entries: 8,
        ..CacheLimits::default()
    };
    let cfg = Rc::new(
        ServerConfig::new(Some(&t.root()))
            .unwrap()
            .with_cache(limits),
    );
    for round in 0..3 {
        for i in 0..10u8 {
            let (st, body) = get_on(&cfg, &format!("/f{i}"));
            assert_eq!((st, body), (200, vec![i; 1000]), "round {round}");
            let (_, _, files, bytes) = cfg.cache_counters().unwrap();
            assert!(files <= 3 && bytes <= 3_500, "{files} files, {bytes} bytes");
        }
    }
    // A file above the per-file bound streams and is not kept.
    let (st, body) = get_on(&cfg, "/big.bin");
    assert_eq!(st, 200);
    assert_eq!(body, std::fs::read(t.root().join("big.bin")).unwrap());
    assert!(cfg.cache_counters().unwrap().3 <= 3_500);
}

#[test]
fn content_types() {
    assert_eq!(
        content_type(Path::new("x.HTML")),
        "text/html; charset=utf-8"
    );
    assert_eq!(content_type(Path::new("x.png")), "image/png");
    assert_eq!(content_type(Path::new("x.jpeg")), "image/jpeg");
    assert_eq!(content_type(Path::new("x")), "application/octet-stream");
}

// ---------------------------------------------------------------- client

#[test]
fn url_parsing() {
    let u = parse_url("http://10.0.0.2/bytes/5").unwrap();
    assert_eq!(
        u,
        Url {
            host: Ipv4Addr::new(10, 0, 0, 2),
            port: 80,
            path: "/bytes/5".into()
        }
    );
    let u = parse_url("HTTP://10.0.0.2:8080").unwrap();
    assert_eq!((u.port, u.path.as_str()), (8080, "/"));
    let u = parse_url("http://1.2.3.4:/a?b=c#frag").unwrap();
    assert_eq!((u.port, u.path.as_str()), (80, "/a?b=c"));
    let u = parse_url("http://1.2.3.4?q").unwrap();
    assert_eq!(u.path, "/?q");
    assert_eq!(parse_url("https://1.2.3.4/"), Err(UrlError::Scheme));
    assert_eq!(parse_url("ftp://1.2.3.4/"), Err(UrlError::Scheme));
    assert_eq!(parse_url("1.2.3.4/"), Err(UrlError::Scheme));
    assert_eq!(parse_url("http://example.com/"), Err(UrlError::Host));
    assert_eq!(parse_url("http://[::1]/"), Err(UrlError::Host));
    assert_eq!(parse_url("http://1.2.3/"), Err(UrlError::Host));
    assert_eq!(parse_url("http:///"), Err(UrlError::Host));
    assert_eq!(parse_url("http://u@1.2.3.4/"), Err(UrlError::Userinfo));
    assert_eq!(parse_url("http://1.2.3.4:0/"), Err(UrlError::Port));
    assert_eq!(parse_url("http://1.2.3.4:65536/"), Err(UrlError::Port));
    assert_eq!(parse_url("http://1.2.3.4:+80/"), Err(UrlError::Port));
    assert_eq!(parse_url("http://1.2.3.4/a b"), Err(UrlError::Path));
}

#[test]
fn request_bytes() {
    let g = HttpGet::new(&parse_url("http://10.0.0.2/bytes/5").unwrap());
    let want = format!(
        "GET /bytes/5 HTTP/1.1\r\nHost: 10.0.0.2\r\nUser-Agent: lazynet/{}\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(g.request(), want.as_bytes());
    let g = HttpGet::new(&parse_url("http://10.0.0.2:8080/").unwrap());
    assert!(g
        .request()
        .starts_with(b"GET / HTTP/1.1\r\nHost: 10.0.0.2:8080\r\n"));
    // Our own server accepts it.
    let (r, close) = one(g.request());
    assert_eq!(r.status, 404);
    assert!(close);
}

fn client() -> HttpGet {
    HttpGet::new(&parse_url("http://127.0.0.1/").unwrap())
}

/// Feeds `input` in pieces of `step`, collects body; returns (body, get).
fn fetch(input: &[u8], step: usize) -> (Result<Vec<u8>, HttpError>, HttpGet) {
    let mut g = client();
    let mut body = Vec::new();
    for piece in input.chunks(step.max(1)) {
        if let Err(e) = g.feed_all(piece, |b| body.extend_from_slice(b)) {
            return (Err(e), g);
        }
    }
    (Ok(body), g)
}

#[test]
fn client_content_length() {
    let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Y: z\r\n\r\nhelloEXTRA";
    for step in [1, 2, 3, 100] {
        let (body, mut g) = fetch(resp, step);
        assert_eq!(body.unwrap(), b"hello");
        assert!(g.is_done());
        assert_eq!(g.status(), Some(200));
        assert_eq!(g.header("x-y"), Some("z"));
        assert_eq!(g.framing(), Some(Framing::Length(5)));
        assert_eq!(g.body_bytes(), 5);
        assert_eq!(g.on_eof(), Ok(()));
    }
    // Done: the rest is not consumed.
    let mut g = client();
    assert_eq!(g.feed_all(resp, |_| {}), Ok(resp.len() - 5));
    // Truncated.
    let (body, mut g) = fetch(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", 100);
    assert_eq!(body.unwrap(), b"hel");
    assert!(!g.is_done());
    assert_eq!(g.on_eof(), Err(HttpError::Truncated));
    // Zero length, 204, 304: done after the head.
    for resp in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"[..],
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n",
    ] {
        let (body, g) = fetch(resp, 1);
        assert!(body.unwrap().is_empty());
        assert!(g.is_done());
    }
}

#[test]
fn client_read_until_close() {
    let resp = b"HTTP/1.0 200 OK\r\nContent-Type: x\r\n\r\nsome body bytes";
    for step in [1, 5, 1000] {
        let (body, mut g) = fetch(resp, step);
        assert_eq!(body.unwrap(), b"some body bytes");
        assert!(!g.is_done());
        assert_eq!(g.framing(), Some(Framing::UntilClose));
        assert_eq!(g.on_eof(), Ok(()));
        assert!(g.is_done());
    }
    // Unknown transfer coding: until close.
    let (body, _) = fetch(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzz", 1);
    assert_eq!(body.unwrap(), b"zz");
    // EOF during the head.
    let (_, mut g) = fetch(b"HTTP/1.1 200 OK\r\n", 1);
    assert_eq!(g.on_eof(), Err(HttpError::Truncated));
}

fn chunked(body: &[u8], sizes: &[usize]) -> Vec<u8> {
    let mut v =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n".to_vec();
    let mut rest = body;
    let mut i = 0;
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].clamp(1, rest.len());
        i += 1;
        if i % 2 == 0 {
            v.extend_from_slice(format!("{n:X};ext=1\r\n").as_bytes());
        } else {
            v.extend_from_slice(format!("{n:x}\r\n").as_bytes());
        }
        v.extend_from_slice(&rest[..n]);
        v.extend_from_slice(b"\r\n");
        rest = &rest[n..];
    }
    v.extend_from_slice(b"0\r\nX-Trailer: yes\r\n\r\n");
    v
}

#[test]
fn client_chunked_split_everywhere() {
    let body: Vec<u8> = (0..300u32).map(|i| (i % 256) as u8).collect();
    let mut resp = chunked(&body, &[1, 17, 100, 255]);
    resp.extend_from_slice(b"GARBAGE AFTER");
    let end = resp.len() - 13;
    // Every split into two pieces.
    for cut in 0..=resp.len() {
        let mut g = client();
        let mut got = Vec::new();
        let a = g
            .feed_all(&resp[..cut], |b| got.extend_from_slice(b))
            .unwrap();
        let b = g
            .feed_all(&resp[cut..], |b| got.extend_from_slice(b))
            .unwrap();
        assert_eq!(got, body, "cut {cut}");
        assert!(g.is_done());
        assert_eq!(a + b, end, "cut {cut}");
        assert_eq!(g.framing(), Some(Framing::Chunked));
    }
    // Byte by byte.
    let (got, g) = fetch(&resp, 1);
    assert_eq!(got.unwrap(), body);
    assert!(g.is_done());
}

#[test]
fn client_chunked_variants_and_errors() {
    // LF-only line ends, upper-case hex, leading zeros, BWS before extension, empty trailer.
    let (body, g) = fetch(
        b"HTTP/1.1 200 OK\ntransfer-encoding: gzip, Chunked\n\n000A ; a=b\n0123456789\n0\n\n",
        1,
    );
    assert_eq!(body.unwrap(), b"0123456789");
    assert!(g.is_done());
    let bad: &[(&[u8], HttpError)] = &[
        (b"zz\r\n", HttpError::BadChunk),
        (b"\r\n", HttpError::BadChunk),
        (b"5x\r\n", HttpError::BadChunk),
        (b"3\r\nabcX\r\n", HttpError::BadChunk),
        (b"3\r\nabc\r\r\n", HttpError::BadChunk),
        (b"10000000000000000\r\n", HttpError::BadChunk),
    ];
    for (tail, err) in bad {
        let mut resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        resp.extend_from_slice(tail);
        let (r, _) = fetch(&resp, 1);
        assert_eq!(r, Err(*err), "{}", String::from_utf8_lossy(tail));
    }
    // Bounded chunk-size line.
    let mut resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;".to_vec();
    resp.extend(std::iter::repeat_n(b'x', MAX_CHUNK_LINE));
    let (r, _) = fetch(&resp, 1000);
    assert_eq!(r, Err(HttpError::ChunkLineTooLong));
    // Bounded trailers.
    let mut resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n".to_vec();
    for _ in 0..MAX_TRAILER_BYTES / 10 + 1 {
        resp.extend_from_slice(b"X: 123456\r\n");
    }
    let (r, _) = fetch(&resp, 1000);
    assert_eq!(r, Err(HttpError::TrailerTooLarge));
    // Truncated chunked.
    let (_, mut g) = fetch(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
        1,
    );
    assert_eq!(g.on_eof(), Err(HttpError::Truncated));
}

#[test]
fn client_status_line_and_headers() {
    let (_, g) = fetch(b"HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n", 1);
    assert_eq!(g.status(), Some(404));
    let (_, g) = fetch(b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", 1);
    assert_eq!(g.status(), Some(200));
    // 1xx interim responses are skipped.
    let (body, g) = fetch(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\nLink: x\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
        1,
    );
    assert_eq!(body.unwrap(), b"ok");
    assert_eq!(g.status(), Some(201));
    assert_eq!(g.header("link"), None);
    let bad: &[(&[u8], HttpError)] = &[
        (b"HTTP/2 200 OK\r\n\r\n", HttpError::BadStatusLine),
        (b"HTTP/2.0 200 OK\r\n\r\n", HttpError::BadVersion),
        (b"ICY 200 OK\r\n\r\n", HttpError::BadStatusLine),
        (b"HTTP/1.1 2000 OK\r\n\r\n", HttpError::BadStatusLine),
        (b"HTTP/1.1 20 OK\r\n\r\n", HttpError::BadStatusLine),
        (b"HTTP/1.1 099 OK\r\n\r\n", HttpError::BadStatusLine),
        (
            b"HTTP/1.1 101 Switching\r\n\r\n",
            HttpError::UnexpectedUpgrade,
        ),
        (
            b"HTTP/1.1 200 OK\r\nBad Header: x\r\n\r\n",
            HttpError::BadHeader,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            HttpError::BadContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            HttpError::BadContentLength,
        ),
    ];
    for (resp, err) in bad {
        let (r, _) = fetch(resp, 1);
        assert_eq!(r, Err(*err), "{}", String::from_utf8_lossy(resp));
    }
    let mut big = b"HTTP/1.1 200 OK\r\n".to_vec();
    big.extend(std::iter::repeat_n(b'a', MAX_RESPONSE_HEADER_BYTES));
    let (r, _) = fetch(&big, 4096);
    assert_eq!(r, Err(HttpError::HeaderTooLarge));
}

#[test]
fn client_against_server() {
    // The client parses what the server writes.
    for n in [0u64, 1, 5000, 100_000] {
        let mut c = conn();
        let g0 = HttpGet::new(&parse_url(&format!("http://10.0.0.1/bytes/{n}")).unwrap());
        let out = run(&mut c, &[g0.request()]);
        assert!(c.wants_close());
        let (body, g) = fetch(&out, 999);
        let body = body.unwrap();
        assert!(g.is_done());
        assert_eq!(g.status(), Some(200));
        assert_eq!(Sha256::digest(&body).as_slice(), pattern_sha256(n));
    }
}

#[test]
fn feed_returns_subslices() {
    let mut g = client();
    let input =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    let f = g.feed(input).unwrap();
    assert_eq!(f.body, b"abc");
    let rest = &input[f.consumed..];
    let f = g.feed(rest).unwrap();
    assert_eq!(f.body, b"de");
    let rest = &rest[f.consumed..];
    let f = g.feed(rest).unwrap();
    assert!(f.body.is_empty());
    assert_eq!(f.consumed, rest.len());
    assert!(g.is_done());
}

// ---------------------------------------------------------------- properties

fn request_mix() -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(b"\r\nGET /bytes/1000 HTTP/1.1\r\nHost: a\r\nX-Pad:   spaced   \r\n\r\n");
    v.extend_from_slice(b"HEAD /bytes/77 HTTP/1.1\nHost: a\n\n");
    v.extend_from_slice(
        b"PUT /upload HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 300\r\n\r\n",
    );
    v.extend((0..300u32).map(|i| (i * 13) as u8));
    v.extend_from_slice(b"DELETE /x HTTP/1.1\r\nHost: a\r\n\r\n");
    v.extend_from_slice(b"GET /bytes/5 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    v.extend_from_slice(b"GET /bytes/2 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    v.extend_from_slice(b"GET /bytes/9 HTTP/1.1\r\nHost: a\r\n\r\n");
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn request_split_at_random_points_parses_the_same(
        cuts in proptest::collection::vec(0usize..2000, 0..30),
        out_size in 1usize..5000,
    ) {
        let req = request_mix();
        let (whole, close) = serve(&req);
        prop_assert!(close);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (req.len() + 1)).collect();
        cuts.sort_unstable();
        let mut chunks = Vec::new();
        let mut prev = 0;
        for c in cuts.into_iter().chain([req.len()]) {
            chunks.push(&req[prev..c]);
            prev = c;
        }
        let mut c = conn();
        let mut out = Vec::new();
        let mut buf = vec![0u8; out_size];
        for chunk in chunks {
            let mut rest = chunk;
            while !rest.is_empty() {
                let used = c.feed(rest);
                rest = &rest[used..];
                let n = c.poll_output(&mut buf);
                out.extend_from_slice(&buf[..n]);
            }
        }
        loop {
            let n = c.poll_output(&mut buf);
            if n == 0 { break; }
            out.extend_from_slice(&buf[..n]);
        }
        prop_assert!(c.wants_close());
        prop_assert_eq!(out, whole);
    }

    #[test]
    fn chunked_random_sizes_and_splits(
        body in proptest::collection::vec(any::<u8>(), 0..2000),
        sizes in proptest::collection::vec(1usize..300, 1..8),
        cuts in proptest::collection::vec(0usize..5000, 0..20),
    ) {
        let resp = chunked(&body, &sizes);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (resp.len() + 1)).collect();
        cuts.sort_unstable();
        let mut g = client();
        let mut got = Vec::new();
        let mut prev = 0;
        for c in cuts.into_iter().chain([resp.len()]) {
            g.feed_all(&resp[prev..c], |b| got.extend_from_slice(b)).unwrap();
            prev = c;
        }
        prop_assert!(g.is_done());
        prop_assert_eq!(got, body);
    }

    #[test]
    fn pattern_fill_any_offset(offset in 0u64..u64::MAX / 2, len in 0usize..20_000) {
        let mut buf = vec![0u8; len];
        pattern_fill(offset, &mut buf);
        for (i, &b) in buf.iter().enumerate() {
            prop_assert_eq!(b, pattern_byte(offset.wrapping_add(i as u64)));
        }
    }
}
