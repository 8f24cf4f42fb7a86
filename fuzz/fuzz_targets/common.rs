//! What the stack fuzz targets share: the input's framing, steering a frame
//! onto a listener or a connection, the stacks' small configuration, and
//! the wire kept between runs.

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddrV4};

use lazynet::mem::Desc;
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::nic::Nic;
use lazynet::socket::UdpSocket;
use lazynet::stack::{Stack, StackConfig, TcpListener};
use lazynet::wire::checksum::{checksum, fold, partial, pseudo_header_ipv4};

thread_local! {
    /// The wire between runs.
    static WIRE: RefCell<Option<(WireEnd, WireEnd)>> = const { RefCell::new(None) };
}

/// The wire for one run: the last run's, reset (`WirePair::reset`: creating
/// a region per run cost more than the run), or a new one.
pub fn wire() -> (WireEnd, WireEnd) {
    match WIRE.with(|w| w.borrow_mut().take()) {
        Some((a, b)) => WirePair::reset(a, b).unwrap(),
        None => WirePair::new(WireConfig {
            buf_count: 512,
            ring_capacity: 64,
            ..WireConfig::default()
        })
        .unwrap(),
    }
}

/// Keeps the wire for the next run.
pub fn keep_wire(a: WireEnd, b: WireEnd) {
    WIRE.with(|w| *w.borrow_mut() = Some((a, b)));
}

/// A stack configuration with small tables and buffers: set-up stays
/// cheap, and the limits are reachable by a short input. A short TIME-WAIT
/// keeps the closing phase short.
pub fn config(addr: Ipv4Addr, seed: u64) -> StackConfig {
    let tcp = lazynet::proto::tcp::Config {
        time_wait: 2_000_000_000,
        send_buf: 4096,
        recv_buf: 4096,
        ..Default::default()
    };
    StackConfig {
        addr,
        seed,
        tcp,
        reasm_store: 1,
        reasm: lazynet::proto::ip::ReasmConfig {
            slots: 4,
            byte_budget: 8 * 1024,
            ..Default::default()
        },
        arp: lazynet::proto::arp::ArpConfig {
            capacity: 8,
            queue_per_addr: 8,
            queue_total: 16,
            ..Default::default()
        },
        tcp_listen: lazynet::proto::tcp::ListenConfig {
            backlog: 4,
            syn_queue: 8,
            ..Default::default()
        },
        tcp_time_wait_cap: 16,
        tcp_channel_cap: 32,
        udp_channel_cap: 32,
        control_cap: 32,
        fragment_cap: 32,
        ..StackConfig::default()
    }
}

/// Splits the input into (steering byte, frame): a 2-byte big-endian
/// length (cut to what is left and to 2048), a steering byte, the frame.
pub fn frames(data: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    let mut rest = data;
    std::iter::from_fn(move || {
        if rest.len() < 3 {
            return None;
        }
        let len = (u16::from_be_bytes([rest[0], rest[1]]) as usize)
            .min(rest.len() - 3)
            .min(2048);
        let steer = rest[2];
        let frame = &rest[3..3 + len];
        rest = &rest[3 + len..];
        Some((steer, frame))
    })
}

/// A frame whose steering byte is odd (and that is long enough) becomes a
/// TCP segment from `src` to `dst` port 80: Ethernet addresses, EtherType,
/// protocol and IP addresses are written over it, and the source port too
/// when `sport` is given (a connection's; else the frame's own, for the
/// listener). The IPv4 total length, the TCP checksum and the IPv4 header
/// checksum are fixed up unless steering bits 4, 3 and 2 say not to.
pub fn steer(f: &mut [u8], steer: u8, src: Ipv4Addr, dst: Ipv4Addr, sport: Option<u16>) {
    let len = f.len();
    if steer & 1 == 0 || len < 38 {
        return;
    }
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[8, 0]);
    let ihl = ((f[14] & 0x0f) as usize * 4).max(20);
    f[14 + 9] = 6;
    f[14 + 12..14 + 16].copy_from_slice(&src.octets());
    f[14 + 16..14 + 20].copy_from_slice(&dst.octets());
    if len >= 14 + ihl + 4 {
        if let Some(p) = sport {
            f[14 + ihl..14 + ihl + 2].copy_from_slice(&p.to_be_bytes());
        }
        f[14 + ihl + 2..14 + ihl + 4].copy_from_slice(&80u16.to_be_bytes());
    }
    if steer & 16 == 0 {
        // Consistent IPv4 total length.
        f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    }
    if steer & 8 == 0 && len >= 14 + ihl + 20 {
        // A valid TCP checksum, so the segment reaches the protocol.
        let t = &mut f[14 + ihl..];
        t[16..18].copy_from_slice(&[0, 0]);
        let c = !fold(partial(t, pseudo_header_ipv4(src, dst, 6, t.len() as u16)));
        t[16..18].copy_from_slice(&c.to_be_bytes());
    }
    if steer & 4 == 0 {
        // Fix the IPv4 header checksum (over the header present).
        let h = 14 + ihl.min(len - 14);
        f[24..26].copy_from_slice(&[0, 0]);
        let c = checksum(&f[14..h]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
    }
}

/// Sends `frame` from `end`, steered (see [`steer`]); dropped if `end` has
/// no free buffer or its ring is full, as a NIC would.
pub fn inject(
    end: &mut WireEnd,
    frame: &[u8],
    steer_byte: u8,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: Option<u16>,
) {
    let len = frame.len();
    let mut bi = [0u32];
    if end.alloc(&mut bi) == 1 {
        let f = &mut end.buffers_mut().buf_mut(bi[0]).unwrap()[..len];
        f.copy_from_slice(frame);
        steer(f, steer_byte, src, dst, sport);
        if end.send(&[Desc::new(bi[0], len as u16)]) == 0 {
            end.release(&[Desc::new(bi[0], 0)]);
        }
    }
}

/// The stack under test: UDP sockets on port 7 (its address) and 9 (any
/// address), and a TCP listener on port 80 (any address).
pub struct Server {
    pub stack: Stack<WireEnd>,
    pub listener: TcpListener,
    s7: UdpSocket,
    s9: UdpSocket,
}

impl Server {
    pub fn new(end: WireEnd, addr: Ipv4Addr) -> Self {
        let mut stack = Stack::new(end, config(addr, 1));
        let s7 = UdpSocket::bind(&mut stack, SocketAddrV4::new(addr, 7)).unwrap();
        let s9 = UdpSocket::bind(&mut stack, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9)).unwrap();
        let listener = stack
            .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), None, None)
            .unwrap();
        Server {
            stack,
            listener,
            s7,
            s9,
        }
    }

    /// One datagram from each UDP socket, if any.
    pub fn read_udp(&mut self, buf: &mut [u8]) {
        let _ = self.s7.recv_from(&mut self.stack, buf);
        let _ = self.s9.recv_from(&mut self.stack, buf);
    }

    /// Reads the UDP sockets empty, checks that every frame the stack
    /// received is accounted for, and closes the sockets.
    pub fn close_udp(self, buf: &mut [u8]) -> Stack<WireEnd> {
        let Server {
            mut stack, s7, s9, ..
        } = self;
        while s7.recv_from(&mut stack, buf).is_ok() || s9.recv_from(&mut stack, buf).is_ok() {}
        check_accounting(&stack);
        s7.close(&mut stack).unwrap();
        s9.close(&mut stack).unwrap();
        stack
    }
}

/// Every frame the stack received is counted as handled, dropped or still
/// queued.
pub fn check_accounting(stack: &Stack<WireEnd>) {
    let st = stack.stats();
    assert_eq!(
        st.frames_accounted() + stack.queued_frames() as u64,
        st.rx_frames
    );
}
