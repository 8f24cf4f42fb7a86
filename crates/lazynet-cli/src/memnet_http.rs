//! `lazynet serve http --memnet API --daemon PATH`: the web server as a
//! MemNet client of a daemon in the offload placement, which runs its TCP.
//!
//! One event loop over jobs. MemNet has no `select`: the server waits on
//! many connections by keeping an accept and, per connection, a receive
//! posted, and takes completions in the order they come
//! ([`MemNet::wait_any`]). The three APIs differ in how bytes move and
//! whether sending waits (the paper's three MemNet series):
//!
//! - `sockets`: request bytes are copied out of the library's range into
//!   the server's own buffer, and responses copied in by [`MemNet::send`],
//!   which waits until TCP holds them;
//! - `direct`: requests are parsed where the daemon placed them (a range
//!   registered per connection), responses written straight into another
//!   and sent with [`MemNet::send_direct`] (waits, no copy);
//! - `async`: as `direct`, but [`MemNet::async_send`] returns at once; the
//!   connection's next step happens when the send's completion comes.
//!
//! Every connection slot's two ranges are registered once, at start; the
//! number of slots bounds the connections served at once (more are closed
//! at accept).

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lazynet::memnet::{Error, Job, MemHandle, MemNet, Socket};

use crate::http::{HttpConn, ServerConfig};

/// Request bytes one receive takes, at most.
const IN_BYTES: usize = 4096;
/// Response bytes one send carries, at most.
const OUT_BYTES: usize = 16 * 1024;
/// Accepts kept posted.
const ACCEPTS: usize = 8;

/// Which MemNet calls the server uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Api {
    /// The copying sockets calls.
    Sockets,
    /// `recv_direct`/`send_direct` on registered ranges.
    Direct,
    /// `async_recv`/`async_send` on registered ranges.
    Async,
}

/// What the server did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Connections accepted.
    pub connections: u64,
    /// Requests answered.
    pub requests: u64,
    /// Connections refused for want of a slot.
    pub refused: u64,
    /// Jobs that failed (resets, time-outs).
    pub failed: u64,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Accept,
    /// The close of a connection refused for want of a slot.
    Refused,
    Recv(usize),
    Send(usize),
    Close(usize),
}

struct Slot {
    sock: Option<Socket>,
    http: Option<HttpConn>,
    rin: MemHandle,
    rout: MemHandle,
    closing: bool,
}

struct Server<'a> {
    m: &'a mut MemNet,
    api: Api,
    cfg: Rc<ServerConfig>,
    slots: Vec<Slot>,
    free: Vec<usize>,
    jobs: HashMap<Job, Kind>,
    /// The server's own buffers (the sockets API copies into and out of them).
    app_in: Vec<u8>,
    app_out: Vec<u8>,
    stats: Stats,
}

impl Server<'_> {
    fn post(&mut self, r: Result<Job, Error>, k: Kind) -> bool {
        match r {
            Ok(j) => {
                self.jobs.insert(j, k);
                true
            }
            Err(_) => {
                self.stats.failed += 1;
                false
            }
        }
    }

    fn recv(&mut self, i: usize) {
        let s = self.slots[i].sock.expect("open");
        let r = self.m.async_recv(s, self.slots[i].rin, IN_BYTES);
        if !self.post(r, Kind::Recv(i)) {
            self.close(i);
        }
    }

    fn close(&mut self, i: usize) {
        let sl = &mut self.slots[i];
        let Some(s) = sl.sock else { return };
        if sl.closing {
            return;
        }
        sl.closing = true;
        let r = self.m.async_close(s);
        if !self.post(r, Kind::Close(i)) {
            self.release(i);
        }
    }

    fn release(&mut self, i: usize) {
        let sl = &mut self.slots[i];
        sl.sock = None;
        sl.http = None;
        sl.closing = false;
        self.free.push(i);
    }

    /// Sends what the connection has to say; then reads on or closes.
    fn respond(&mut self, i: usize) {
        let s = self.slots[i].sock.expect("open");
        let rout = self.slots[i].rout;
        loop {
            let http = self.slots[i].http.as_mut().expect("open");
            if !http.has_output() {
                break;
            }
            let sent = match self.api {
                Api::Sockets => {
                    let n = http.poll_output(&mut self.app_out);
                    self.m.send(s, &self.app_out[..n]).map(|_| ())
                }
                Api::Direct => match self.m.buf_mut(rout) {
                    Ok(b) => {
                        let n = http.poll_output(&mut b[..OUT_BYTES]);
                        self.m.send_direct(s, rout, n).map(|_| ())
                    }
                    Err(e) => Err(e),
                },
                Api::Async => {
                    // No send is in flight here: the next one is posted
                    // when the last one completes.
                    let Ok(b) = self.m.buf_mut(rout) else {
                        self.stats.failed += 1;
                        return self.close(i);
                    };
                    let n = http.poll_output(&mut b[..OUT_BYTES]);
                    let r = self.m.async_send(s, rout, n);
                    if !self.post(r, Kind::Send(i)) {
                        self.close(i);
                    }
                    // The rest when this send completes.
                    return;
                }
            };
            if sent.is_err() {
                self.stats.failed += 1;
                self.close(i);
                return;
            }
        }
        self.after_output(i);
    }

    fn after_output(&mut self, i: usize) {
        let http = self.slots[i].http.as_ref().expect("open");
        if http.wants_close() {
            self.close(i);
        } else {
            self.recv(i);
        }
    }

    fn on_done(&mut self, k: Kind, r: Result<u64, Error>) {
        match (k, r) {
            (Kind::Accept, Ok(v)) => {
                let s = MemNet::socket_of(v);
                self.stats.connections += 1;
                match self.free.pop() {
                    Some(i) => {
                        // Responses go out whole at once (as Linux servers
                        // set TCP_NODELAY).
                        let _ = self.m.set_nodelay(s, true);
                        let sl = &mut self.slots[i];
                        sl.sock = Some(s);
                        sl.http = Some(HttpConn::new(self.cfg.clone()));
                        self.recv(i);
                    }
                    None => {
                        self.stats.refused += 1;
                        let r = self.m.async_close(s);
                        if let Ok(j) = r {
                            // Reaped and forgotten when it completes.
                            self.jobs.insert(j, Kind::Refused);
                        }
                    }
                }
            }
            (Kind::Accept | Kind::Refused, Err(_)) | (Kind::Refused, Ok(_)) => {}
            (Kind::Recv(i), Ok(n)) => {
                let n = n as usize;
                let before;
                {
                    let sl = &mut self.slots[i];
                    let http = sl.http.as_mut().expect("open");
                    before = http.requests();
                    if n == 0 {
                        http.on_eof();
                    } else {
                        let Ok(got) = self.m.buf(sl.rin) else {
                            return self.close(i);
                        };
                        let got = &got[..n];
                        match self.api {
                            Api::Sockets => {
                                // The sockets API hands the bytes over in the
                                // server's own buffer.
                                self.app_in[..n].copy_from_slice(got);
                                http.feed(&self.app_in[..n]);
                            }
                            Api::Direct | Api::Async => {
                                http.feed(got);
                            }
                        }
                    }
                }
                let http = self.slots[i].http.as_ref().expect("open");
                self.stats.requests += http.requests() - before;
                if n == 0 && !http.has_output() {
                    return self.close(i);
                }
                self.respond(i);
            }
            (Kind::Send(i), Ok(_)) => self.respond(i),
            (Kind::Close(i), _) => self.release(i),
            (Kind::Recv(i) | Kind::Send(i), Err(_)) => {
                self.stats.failed += 1;
                self.close(i);
            }
        }
    }
}

/// Serves HTTP on `port` through MemNet until `stop`; at most `max_conns`
/// connections at once.
pub fn serve(
    m: &mut MemNet,
    port: u16,
    api: Api,
    cfg: Rc<ServerConfig>,
    max_conns: usize,
    stop: &AtomicBool,
) -> anyhow::Result<Stats> {
    let l = m
        .listen(port, 1024)
        .map_err(|e| anyhow::anyhow!("listen on {port}: {e}"))?;
    let mut slots = Vec::with_capacity(max_conns);
    for _ in 0..max_conns {
        let rin = m
            .register_mem(IN_BYTES)
            .map_err(|e| anyhow::anyhow!("register: {e}"))?;
        let rout = m
            .register_mem(OUT_BYTES)
            .map_err(|e| anyhow::anyhow!("register: {e}"))?;
        slots.push(Slot {
            sock: None,
            http: None,
            rin,
            rout,
            closing: false,
        });
    }
    let mut srv = Server {
        m,
        api,
        cfg,
        slots,
        free: (0..max_conns).rev().collect(),
        jobs: HashMap::with_capacity(4 * max_conns),
        app_in: vec![0; IN_BYTES],
        app_out: vec![0; OUT_BYTES],
        stats: Stats::default(),
    };
    let mut accepts = 0;
    while !stop.load(Ordering::Acquire) {
        while accepts < ACCEPTS {
            let r = srv.m.async_accept(l);
            if !srv.post(r, Kind::Accept) {
                break;
            }
            accepts += 1;
        }
        let Some(j) = srv.m.wait_any(Duration::from_millis(20)) else {
            continue;
        };
        let Some(r) = srv.m.job_done(j) else {
            continue;
        };
        let Some(k) = srv.jobs.remove(&j) else {
            continue;
        };
        if let Kind::Accept = k {
            accepts -= 1;
        }
        srv.on_done(k, r);
    }
    Ok(srv.stats)
}

/// `lazynet serve http --memnet API --daemon PATH`: attaches and serves
/// until SIGINT or SIGTERM.
pub fn run(
    path: &Path,
    port: u16,
    api: Api,
    cfg: Rc<ServerConfig>,
    spin_us: u64,
) -> anyhow::Result<()> {
    let stop = crate::util::stop_flag()?;
    let mut m = MemNet::attach(path)?;
    m.set_spin(spin_us.saturating_mul(1000));
    eprintln!(
        "lazynet HTTP server on {}:{port} through MemNet ({api:?}), daemon {}",
        m.addr(),
        path.display()
    );
    println!("ready");
    std::io::Write::flush(&mut std::io::stdout())?;
    let st = serve(&mut m, port, api, cfg, 256, &stop)?;
    println!(
        "connections={} requests={} refused={} failed={}",
        st.connections, st.requests, st.refused, st.failed
    );
    Ok(())
}
