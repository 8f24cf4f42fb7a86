//! The Linux web servers of `memnet` (the paper's "Reg TCP"): the same
//! HTTP code as `lazynet serve http` ([`HttpConn`], with the same
//! simulated work per request), on Linux sockets, one thread:
//!
//! - **epoll**: non-blocking sockets, level-triggered `epoll_wait`, `read`
//!   and `write`;
//! - **io_uring**: an accept, and per connection a receive, kept posted;
//!   responses sent with `IORING_OP_SEND`; one `io_uring_enter` per turn
//!   submits everything and waits for a completion.
//!
//! Both serve until SIGTERM (the experiment's `Proc` drop) or `seconds`.
//!
//! **Owns:** its listening socket and connections. **May not touch:** the
//! HTTP code (`lazynet_cli::http`, shared with lazynet's server so that
//! both do the same work); the namespace it runs in (`memnet`'s).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;
use std::time::{Duration, Instant};

use lazynet_cli::http::{HttpConn, ServerConfig};

use crate::infra::sys::{owned_fd, Uring};

const OUT: usize = 16 * 1024;

fn config(work_us: u64) -> anyhow::Result<Rc<ServerConfig>> {
    Ok(Rc::new(
        ServerConfig::new(None)?.with_work_ns(work_us * 1000),
    ))
}

/// The epoll server.
pub fn epoll(bind: SocketAddrV4, work_us: u64, seconds: f64) -> anyhow::Result<()> {
    use rustix::event::epoll::{self, EventData, EventFlags};
    let cfg = config(work_us)?;
    let l = TcpListener::bind(bind)?;
    l.set_nonblocking(true)?;
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    epoll::add(&ep, &l, EventData::new_u64(u64::MAX), EventFlags::IN)?;
    println!("ready");
    std::io::stdout().flush()?;
    let mut conns: HashMap<u64, (TcpStream, HttpConn, Vec<u8>)> = HashMap::new();
    let mut next = 0u64;
    let mut events = Vec::with_capacity(256);
    let mut inb = vec![0u8; 4096];
    let mut out = vec![0u8; OUT];
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < end {
        events.clear();
        let t = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 50_000_000,
        };
        epoll::wait(&ep, rustix::buffer::spare_capacity(&mut events), Some(&t))?;
        for ev in &events {
            let k = ev.data.u64();
            if k == u64::MAX {
                while let Ok((s, _)) = l.accept() {
                    s.set_nonblocking(true)?;
                    let _ = s.set_nodelay(true);
                    epoll::add(&ep, &s, EventData::new_u64(next), EventFlags::IN)?;
                    conns.insert(next, (s, HttpConn::new(cfg.clone()), Vec::new()));
                    next += 1;
                }
                continue;
            }
            let Some((s, http, pend)) = conns.get_mut(&k) else {
                continue;
            };
            let mut close = false;
            match s.read(&mut inb) {
                Ok(0) => http.on_eof(),
                Ok(n) => {
                    http.feed(&inb[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => close = true,
            }
            // Output, all of it (a short write keeps the rest and waits
            // for room with a blocking write: responses are small).
            while !close && (http.has_output() || !pend.is_empty()) {
                if pend.is_empty() {
                    let n = http.poll_output(&mut out);
                    pend.extend_from_slice(&out[..n]);
                }
                match s.write(pend) {
                    Ok(n) => {
                        pend.drain(..n);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::yield_now();
                    }
                    Err(_) => close = true,
                }
            }
            if close || http.wants_close() {
                if let Some((s, _, _)) = conns.remove(&k) {
                    let _ = epoll::delete(&ep, &s);
                }
            }
        }
    }
    Ok(())
}

/// The io_uring server.
pub fn uring(bind: SocketAddrV4, work_us: u64, seconds: f64) -> anyhow::Result<()> {
    const MAXC: usize = 512;
    let cfg = config(work_us)?;
    let l = TcpListener::bind(bind)?;
    // Buffers: 2 per connection slot (in, out).
    let mut ring = Uring::new(2048, 2 * MAXC, OUT, None)?;
    struct C {
        fd: OwnedFd,
        http: HttpConn,
    }
    let mut conns: Vec<Option<C>> = (0..MAXC).map(|_| None).collect();
    let mut free: Vec<usize> = (0..MAXC).rev().collect();
    let mut done = Vec::with_capacity(256);
    const ACCEPT: u32 = u32::MAX;
    ring.accept(l.as_fd(), ACCEPT)?;
    println!("ready");
    std::io::stdout().flush()?;
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < end {
        ring.submit(1)?;
        done.clear();
        ring.complete(&mut done);
        for &(tag, _buf, res) in &done {
            if tag == ACCEPT {
                ring.accept(l.as_fd(), ACCEPT)?;
                let Some(fd) = owned_fd(res) else { continue };
                let Some(i) = free.pop() else {
                    continue; // dropped: closed
                };
                let s = TcpStream::from(fd);
                let _ = s.set_nodelay(true);
                conns[i] = Some(C {
                    fd: s.into(),
                    http: HttpConn::new(cfg.clone()),
                });
                let c = conns[i].as_ref().expect("just set");
                ring.recv(c.fd.as_fd(), 2 * i, 4096, i as u32)?;
                continue;
            }
            let i = tag as usize & 0x7fff_ffff;
            let is_send = tag & 0x8000_0000 != 0;
            let Some(c) = conns[i].as_mut() else { continue };
            let mut close = res < 0;
            if !close && !is_send {
                if res == 0 {
                    c.http.on_eof();
                } else {
                    let b = ring.buf(2 * i).expect("completed");
                    c.http.feed(&b[..res as usize]);
                }
            }
            if !close {
                if c.http.has_output() {
                    let b = ring.buf_mut(2 * i + 1).expect("no send in flight");
                    let n = c.http.poll_output(b);
                    ring.send(c.fd.as_fd(), 2 * i + 1, n, i as u32 | 0x8000_0000)?;
                    continue;
                }
                if c.http.wants_close() || (res == 0 && !is_send) {
                    close = true;
                } else {
                    ring.recv(c.fd.as_fd(), 2 * i, 4096, i as u32)?;
                }
            }
            if close {
                conns[i] = None;
                free.push(i);
            }
        }
    }
    Ok(())
}
