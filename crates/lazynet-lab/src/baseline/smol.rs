//! smoltcp as the TCP benchmarks' peer stack, over the same [`WireEnd`]
//! as lazynet. The device
//! copies each received frame into a scratch buffer (smoltcp's receive
//! token wants a slice while its transmit token may be used inside the
//! same call) and builds each outgoing frame directly in a wire buffer.
//! Releases and sends are batched like lazynet's and flushed after
//! every `poll`.
//!
//! **Owns:** smoltcp's side of the TCP benchmarks ([`crate::bench::tcp`]'s
//! `Endpoint`). **May not touch:** the benchmark loops, which both stacks
//! share.

use std::sync::OnceLock;

use lazynet::mem::Desc;
use lazynet::nic::wirepair::WireEnd;
use lazynet::nic::Nic;
use smoltcp::iface::{Config as IfConfig, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{self, Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::Instant as SInstant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};

use crate::bench::tcp::{Endpoint, Setup, CLIENT_ADDR, PORT, SERVER_ADDR};

const BATCH: usize = 32;

/// smoltcp's [`Device`] over one end of the wire.
pub struct WireDev {
    nic: WireEnd,
    rxq: [Desc; 64],
    rx_i: usize,
    rx_n: usize,
    rxbuf: Vec<u8>,
    rel: Vec<Desc>,
    txq: Vec<Desc>,
    scratch: Vec<u8>,
    pub tx_dropped: u64,
}

impl WireDev {
    pub fn new(nic: WireEnd) -> Self {
        WireDev {
            nic,
            rxq: [Desc::default(); 64],
            rx_i: 0,
            rx_n: 0,
            rxbuf: vec![0; 2048],
            rel: Vec::with_capacity(BATCH),
            txq: Vec::with_capacity(BATCH),
            scratch: Vec::new(),
            tx_dropped: 0,
        }
    }

    /// Sends the batched frames and releases the batched buffers.
    pub fn flush(&mut self) {
        flush_tx(&mut self.nic, &mut self.txq, &mut self.tx_dropped);
        if !self.rel.is_empty() {
            self.nic.release(&self.rel);
            self.rel.clear();
        }
        self.nic.flush();
    }
}

fn flush_tx(nic: &mut WireEnd, txq: &mut Vec<Desc>, dropped: &mut u64) {
    if txq.is_empty() {
        return;
    }
    let n = nic.send(txq);
    if n < txq.len() {
        *dropped += (txq.len() - n) as u64;
        nic.release(&txq[n..]);
    }
    txq.clear();
}

pub struct Rx<'a> {
    frame: &'a [u8],
}

pub struct Tx<'a> {
    nic: &'a mut WireEnd,
    txq: &'a mut Vec<Desc>,
    scratch: &'a mut Vec<u8>,
    dropped: &'a mut u64,
}

impl phy::RxToken for Rx<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.frame)
    }
}

impl phy::TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut b = [0u32; 1];
        if self.nic.alloc(&mut b) == 1 {
            if let Some(buf) = self.nic.buffers_mut().buf_mut(b[0]) {
                if len <= buf.len() {
                    let r = f(&mut buf[..len]);
                    self.txq.push(Desc::new(b[0], len as u16));
                    if self.txq.len() >= BATCH {
                        flush_tx(self.nic, self.txq, self.dropped);
                    }
                    return r;
                }
            }
            self.nic.release(&[Desc::new(b[0], 0)]);
        }
        // No buffer: the frame is built and dropped (counted).
        *self.dropped += 1;
        self.scratch.resize(len, 0);
        f(&mut self.scratch[..len])
    }
}

impl Device for WireDev {
    type RxToken<'a> = Rx<'a>;
    type TxToken<'a> = Tx<'a>;

    fn receive(&mut self, _t: SInstant) -> Option<(Rx<'_>, Tx<'_>)> {
        if self.rx_i == self.rx_n {
            self.rx_i = 0;
            self.rx_n = self.nic.recv(&mut self.rxq);
            if self.rx_n == 0 {
                return None;
            }
        }
        let d = self.rxq[self.rx_i];
        self.rx_i += 1;
        let len = match self.nic.buffers().frame(d) {
            Some(f) => {
                let len = f.len().min(self.rxbuf.len());
                self.rxbuf[..len].copy_from_slice(&f[..len]);
                len
            }
            None => 0,
        };
        self.rel.push(d);
        if self.rel.len() >= BATCH {
            self.nic.release(&self.rel);
            self.rel.clear();
        }
        Some((
            Rx {
                frame: &self.rxbuf[..len],
            },
            Tx {
                nic: &mut self.nic,
                txq: &mut self.txq,
                scratch: &mut self.scratch,
                dropped: &mut self.tx_dropped,
            },
        ))
    }

    fn transmit(&mut self, _t: SInstant) -> Option<Tx<'_>> {
        Some(Tx {
            nic: &mut self.nic,
            txq: &mut self.txq,
            scratch: &mut self.scratch,
            dropped: &mut self.tx_dropped,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut c = DeviceCapabilities::default();
        c.medium = Medium::Ethernet;
        // smoltcp counts the Ethernet header in the MTU.
        c.max_transmission_unit = self.nic.mtu() + 14;
        c.max_burst_size = None;
        c
    }
}

fn clock() -> &'static std::time::Instant {
    static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();
    EPOCH.get_or_init(std::time::Instant::now)
}

thread_local! {
    /// Milliseconds at the last `now()`: the TSval of the segments
    /// that poll sends. The clock is read once per poll, as lazynet's
    /// harness reads it (the stack takes the time from its caller),
    /// not once more per segment.
    static LAST_MS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

fn now() -> SInstant {
    let us = clock().elapsed().as_micros() as i64;
    LAST_MS.with(|m| m.set((us / 1000) as u32));
    SInstant::from_micros(us)
}

/// TSval clock for smoltcp's timestamp option (milliseconds).
fn tsval() -> u32 {
    LAST_MS.with(|m| m.get())
}

/// A smoltcp interface with one TCP socket.
pub struct Smol {
    iface: Interface,
    dev: WireDev,
    sockets: SocketSet<'static>,
    h: SocketHandle,
}

fn build(end: WireEnd, addr: std::net::Ipv4Addr, seed: u64, setup: &Setup) -> Smol {
    let mut dev = WireDev::new(end);
    let mut cfg = IfConfig::new(HardwareAddress::Ethernet(EthernetAddress(dev.nic.mac())));
    cfg.random_seed = seed;
    let mut iface = Interface::new(cfg, &mut dev, now());
    iface.update_ip_addrs(|a| {
        a.push(IpCidr::new(IpAddress::Ipv4(addr), 24))
            .expect("one address");
    });
    let mut s = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; setup.recv_buf]),
        tcp::SocketBuffer::new(vec![0; setup.send_buf]),
    );
    s.set_nagle_enabled(!setup.nodelay);
    s.set_tsval_generator(Some(tsval));
    let mut sockets = SocketSet::new(Vec::new());
    let h = sockets.add(s);
    Smol {
        iface,
        dev,
        sockets,
        h,
    }
}

impl Smol {
    fn sock(&mut self) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(self.h)
    }
}

impl Endpoint for Smol {
    const NAME: &'static str = "smoltcp";

    fn server(end: WireEnd, setup: &Setup) -> Self {
        let mut s = build(end, SERVER_ADDR, 2, setup);
        s.sock().listen(PORT).expect("listen");
        s
    }

    fn client(end: WireEnd, setup: &Setup) -> Self {
        let mut s = build(end, CLIENT_ADDR, 1, setup);
        let cx = s.iface.context();
        s.sockets
            .get_mut::<tcp::Socket>(s.h)
            .connect(cx, (IpAddress::Ipv4(SERVER_ADDR), PORT), 49152)
            .expect("connect");
        s
    }

    // Never inlined: `lazynet-lab paths` counts the application's calls.
    #[inline(never)]
    fn poll(&mut self) -> bool {
        let r = self.iface.poll(now(), &mut self.dev, &mut self.sockets);
        self.dev.flush();
        r == smoltcp::iface::PollResult::SocketStateChanged
    }

    fn connected(&mut self) -> bool {
        self.sock().state() == tcp::State::Established
    }

    // Never inlined: `lazynet-lab paths` counts the application's calls.
    #[inline(never)]
    fn send(&mut self, data: &[u8]) -> usize {
        self.sock().send_slice(data).unwrap_or(0)
    }

    #[inline]
    fn push(&mut self) {
        self.poll();
    }

    // Never inlined: `lazynet-lab paths` counts the application's calls.
    #[inline(never)]
    fn recv(&mut self, buf: &mut [u8]) -> usize {
        self.sock().recv_slice(buf).unwrap_or(0)
    }
}
