//! An httperf-like HTTP load generator on a lazynet stack: new connections
//! at an exact offered rate (open loop), each making `calls` requests in
//! bursts of `burst` (`--num-calls` and `--burst-length`), bounded in time
//! and in open connections. Or a wrk/ab-like closed loop
//! ([`HttpLoad::closed`]): a fixed number of connections kept busy, each
//! either making requests back to back over keep-alive until the time is
//! up, or (HTTP/1.0, `calls` = 1) replaced by a new one as soon as its reply
//! is in. Its cost per connection is a lazynet TCP
//! handshake, far below a kernel client's, so it can drive a server on
//! the other core to its limit.
//!
//! Counts as httperf does: connections started, completed (every reply
//! received), failed (reset, refused, timed out), and *unavailable* (the
//! open-connection bound was reached, so the connection was never tried:
//! the generator's own limit, reported apart). Replies are counted as they
//! complete; a reply is a status line, headers and a `Content-Length`
//! body. Connection times go into an HDR histogram.
//!
//! **Owns:** its connections on the caller's stack (closed or reset when a
//! run ends). **May not touch:** the server; the stack's internals (public
//! API only).

use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::time::Duration;

use hdrhistogram::Histogram;
use lazynet::nic::Nic;
use lazynet::socket::{SocketError, TcpStream};
use lazynet::stack::{Stack, TcpEvent};

/// What to offer.
#[derive(Clone, Debug)]
pub struct HttpLoad {
    /// New connections per second.
    pub rate: f64,
    /// How long to offer them (then wait up to `timeout` for the last).
    pub duration: Duration,
    /// Requests per connection.
    pub calls: u32,
    /// Requests sent back to back before waiting for their replies.
    pub burst: u32,
    /// The request target (e.g. `/bytes/4096`).
    pub path: String,
    /// Connections open at once, at most.
    pub max_open: usize,
    /// A connection whose handshake or request takes longer fails.
    pub timeout: Duration,
    /// Measure only connections started after this long (warm-up).
    pub warmup: Duration,
    /// Yield the core after every turn (a client that shares its core with
    /// a polling daemon: the daemon then waits at most one turn).
    pub yield_each_turn: bool,
    /// Closed loop: keep this many connections open and busy (`rate` is
    /// then unused). `None`: open loop.
    pub closed: Option<usize>,
    /// Never sleep on the NIC when idle (a client with a core of its own).
    pub busy: bool,
}

impl HttpLoad {
    /// A closed loop of `conns` connections for `duration` after `warmup`:
    /// HTTP/1.1 keep-alive requests back to back (one in flight per
    /// connection) if `keep_alive`, else one HTTP/1.0 request per
    /// connection. Busy-polling, on a core of its own.
    pub fn closed(
        conns: usize,
        keep_alive: bool,
        path: &str,
        duration: Duration,
        warmup: Duration,
    ) -> HttpLoad {
        HttpLoad {
            rate: 0.0,
            duration,
            calls: if keep_alive { u32::MAX } else { 1 },
            burst: 1,
            path: path.into(),
            max_open: conns,
            timeout: Duration::from_secs(2),
            warmup,
            yield_each_turn: false,
            closed: Some(conns),
            busy: true,
        }
    }
}

/// What happened.
#[derive(Clone, Debug)]
pub struct HttpResult {
    /// Connections started in the measured window.
    pub started: u64,
    /// Of them, finished with every reply.
    pub completed: u64,
    /// Of them, failed.
    pub failed: u64,
    /// Connections never tried (open bound).
    pub unavailable: u64,
    /// Replies received in the measured window.
    pub replies: u64,
    /// Length of the measured window.
    pub window: Duration,
    /// Connection times (µs) of the completed ones.
    pub conn_us: Histogram<u64>,
    /// Request times (µs): from the write of a request's burst to its
    /// reply's last byte, for replies in the measured window.
    pub req_us: Histogram<u64>,
}

impl HttpResult {
    /// Replies per second in the measured window.
    pub fn reply_rate(&self) -> f64 {
        self.replies as f64 / self.window.as_secs_f64().max(1e-9)
    }
}

struct Conn {
    s: TcpStream,
    started_ns: u64,
    measured: bool,
    connected: bool,
    sent: u32,
    got: u32,
    buf: Vec<u8>,
    /// When the last burst was written.
    burst_ns: u64,
}

/// Parses complete replies off the front of `buf`; returns how many.
fn take_replies(buf: &mut Vec<u8>) -> Result<u32, ()> {
    let mut n = 0;
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            return Ok(n);
        };
        let head = std::str::from_utf8(&buf[..end]).map_err(|_| ())?;
        if !head.starts_with("HTTP/1.") {
            return Err(());
        }
        let len = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            })
            .ok_or(())?;
        let total = end + 4 + len;
        if buf.len() < total {
            return Ok(n);
        }
        buf.drain(..total);
        n += 1;
    }
}

/// Runs `load` against `server` from `stack` (driving it; call on the
/// client's own core).
pub fn run<N: Nic>(stack: &mut Stack<N>, server: SocketAddrV4, load: &HttpLoad) -> HttpResult {
    let version = if load.calls > 1 { "1.1" } else { "1.0" };
    let req = format!(
        "GET {} HTTP/{version}\r\nHost: {}\r\nUser-Agent: lazynet-lab\r\n\r\n",
        load.path,
        server.ip()
    )
    .into_bytes();
    let mut conns: Vec<Option<Conn>> = Vec::with_capacity(load.max_open);
    let mut free: Vec<usize> = Vec::new();
    let mut by_handle: HashMap<TcpStream, usize> = HashMap::with_capacity(load.max_open);
    let mut events = Vec::with_capacity(256);
    let mut res = HttpResult {
        started: 0,
        completed: 0,
        failed: 0,
        unavailable: 0,
        replies: 0,
        window: Duration::ZERO,
        conn_us: Histogram::new(3).expect("histogram"),
        req_us: Histogram::new(3).expect("histogram"),
    };
    let t0 = stack.now();
    let warm = load.warmup.as_nanos() as u64;
    let end = warm + load.duration.as_nanos() as u64;
    let hard_end = end + load.timeout.as_nanos() as u64;
    let timeout = load.timeout.as_nanos() as u64;
    let mut offered: u64 = 0;
    let mut open = 0usize;
    let mut buf = vec![0u8; 65536];
    let mut touched: Vec<usize> = Vec::new();
    loop {
        let now = stack.now();
        let el = now - t0;
        if el >= hard_end || (el >= end && open == 0) {
            break;
        }
        // New connections due by the schedule (open loop), or to keep the
        // closed loop's number open.
        if el < end {
            let due = match load.closed {
                Some(n) => offered + n.saturating_sub(open) as u64,
                None => (el as f64 * load.rate / 1e9) as u64,
            };
            let mut k = 0;
            while offered < due && k < 64 {
                offered += 1;
                k += 1;
                let measured = el >= warm;
                if open >= load.max_open {
                    if measured {
                        res.unavailable += 1;
                    }
                    continue;
                }
                match TcpStream::connect_nonblocking(stack, server, None) {
                    Ok(s) => {
                        let h = s;
                        let c = Conn {
                            s,
                            started_ns: now,
                            measured,
                            connected: false,
                            sent: 0,
                            got: 0,
                            buf: Vec::new(),
                            burst_ns: now,
                        };
                        let i = match free.pop() {
                            Some(i) => {
                                conns[i] = Some(c);
                                i
                            }
                            None => {
                                conns.push(Some(c));
                                conns.len() - 1
                            }
                        };
                        by_handle.insert(h, i);
                        open += 1;
                        if measured {
                            res.started += 1;
                        }
                    }
                    // Every port held (by open connections or our own
                    // TIME-WAIT entries): the generator's limit, not the
                    // server's failure.
                    Err(SocketError::NoPorts) => {
                        if measured {
                            res.unavailable += 1;
                        }
                    }
                    Err(_) => {
                        if measured {
                            res.started += 1;
                            res.failed += 1;
                        }
                    }
                }
            }
        }
        let rx = stack.poll(now).received;
        let work = stack.tcp_service(now, 1024);
        events.clear();
        stack.tcp_take_events(&mut events);
        touched.clear();
        for e in &events {
            if let TcpEvent::Conn(h) = e {
                if let Some(&i) = by_handle.get(h) {
                    touched.push(i);
                }
            }
        }
        // Time-outs, checked now and then.
        if rx == 0 && work == 0 {
            for (i, c) in conns.iter().enumerate() {
                if let Some(c) = c {
                    if now - c.burst_ns > timeout {
                        touched.push(i);
                    }
                }
            }
        }
        let time_up = load.closed.is_some() && now - t0 >= end;
        for &i in &touched {
            let Some(c) = conns[i].as_mut() else { continue };
            let mut done = false;
            let mut failed = false;
            if !c.connected {
                match c.s.is_connected(stack) {
                    Ok(true) => c.connected = true,
                    Ok(false) => {}
                    Err(_) => failed = true,
                }
            }
            if c.connected && !failed {
                // Read what came.
                loop {
                    match c.s.recv(stack, &mut buf) {
                        Ok(0) => {
                            done = true;
                            break;
                        }
                        Ok(n) => c.buf.extend_from_slice(&buf[..n]),
                        Err(SocketError::WouldBlock) => break,
                        Err(_) => {
                            failed = true;
                            break;
                        }
                    }
                }
                match take_replies(&mut c.buf) {
                    Ok(n) => {
                        c.got += n;
                        if c.measured || (now - t0) >= warm {
                            res.replies += u64::from(n);
                            if n > 0 {
                                let us = (now - c.burst_ns) / 1000;
                                let _ = res.req_us.record_n(us, u64::from(n));
                            }
                        }
                    }
                    Err(()) => failed = true,
                }
                // Time is up for a closed loop: finish with the replies in.
                let stopping = time_up && c.sent > 0;
                // The next burst once the last one's replies are in.
                if !failed && !stopping && c.got == c.sent && c.sent < load.calls {
                    let k = load.burst.min(load.calls - c.sent);
                    c.burst_ns = now;
                    for _ in 0..k {
                        if c.s.send(stack, &req).is_err() {
                            failed = true;
                            break;
                        }
                        c.sent += 1;
                    }
                }
                // HTTP/1.0 (one call) ends at the server's FIN, read above,
                // so that the TIME-WAIT state stays on its side (as a
                // browser's or ab's does), not in our port space.
                if (load.calls > 1 && c.got == load.calls) || (stopping && c.got == c.sent) {
                    done = true;
                }
            }
            if !done && !failed && now - c.burst_ns > timeout {
                failed = true;
            }
            if done || failed {
                let c = conns[i].take().expect("present");
                by_handle.remove(&c.s);
                let stopped = time_up && c.sent > 0;
                if failed || c.got < c.sent || (c.got < load.calls && !stopped) {
                    let _ = c.s.abort(stack);
                    // A closed loop's connections mostly start in the
                    // warm-up; any of them failing is a failure.
                    if c.measured || load.closed.is_some() {
                        res.failed += 1;
                    }
                } else {
                    let _ = c.s.close(stack);
                    if c.measured {
                        res.completed += 1;
                        let _ = res.conn_us.record((now - c.started_ns) / 1000);
                    }
                }
                free.push(i);
                open -= 1;
            }
        }
        if load.yield_each_turn {
            std::thread::yield_now();
        }
        if rx == 0 && work == 0 && touched.is_empty() && !load.busy {
            // Nothing to do: sleep on the NIC until a frame comes or the
            // next connection is due (the client may share its core with
            // a daemon, which needs it then).
            let el = stack.now() - t0;
            let next_due = ((offered + 1) as f64 * 1e9 / load.rate) as u64;
            let wake = if el < end && load.closed.is_none() {
                next_due.saturating_sub(el)
            } else {
                1_000_000
            };
            let wake = wake.min(
                stack
                    .tcp_next_timeout()
                    .map_or(u64::MAX, |t| t.saturating_sub(t0 + el)),
            );
            if wake > 2_000 {
                stack.nic_mut().wait(Some(wake.min(1_000_000)));
            }
        }
    }
    res.window = Duration::from_nanos((stack.now() - t0).min(end).saturating_sub(warm));
    for c in conns.into_iter().flatten() {
        let _ = c.s.abort(stack);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_taken_whole() {
        let mut b = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nx".to_vec();
        assert_eq!(take_replies(&mut b), Ok(1));
        assert_eq!(b, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nx");
        b.push(b'y');
        assert_eq!(take_replies(&mut b), Ok(1));
        assert!(b.is_empty());
        let mut bad = b"SSH-2.0\r\n\r\n".to_vec();
        assert_eq!(take_replies(&mut bad), Err(()));
    }
}
