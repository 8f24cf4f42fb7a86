//! What the whole-stack tests share: the two stacks' addresses, and
//! injecting raw frames from one end of the in-memory wire.

use std::net::{Ipv4Addr, SocketAddrV4};

use lazynet::mem::Desc;
use lazynet::nic::wirepair::WireEnd;
use lazynet::nic::Nic;
use lazynet::proto::tcp::State;
use lazynet::stack::{Stack, TcpListener, TcpStream};

pub const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
pub const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
pub const MS: u64 = 1_000_000;

/// Sends `f` from `end` as one frame; false (buffer back) if the wire
/// has no free buffer or no room.
pub fn inject(end: &mut WireEnd, f: &[u8]) -> bool {
    let mut b = [0u32];
    if end.alloc(&mut b) == 0 {
        return false;
    }
    end.buffers_mut().buf_mut(b[0]).unwrap()[..f.len()].copy_from_slice(f);
    if end.send(&[Desc::new(b[0], f.len() as u16)]) == 1 {
        true
    } else {
        end.release(&[Desc::new(b[0], 0)]);
        false
    }
}

/// `len` bytes of a test stream starting at offset `off`, varied by `salt`.
pub fn data(off: usize, len: usize, salt: u8) -> Vec<u8> {
    (off..off + len).map(|i| (i % 251) as u8 ^ salt).collect()
}

/// One round of both stacks: receive, demultiplex, run TCP work.
pub fn pump<N: Nic>(sa: &mut Stack<WireEnd>, sb: &mut Stack<N>, now: u64) {
    sa.poll(now);
    sa.tcp_service(now, 1024);
    sb.poll(now);
    sb.tcp_service(now, 1024);
}

/// Connects A to B's listener `l` (port 80) in virtual time, a
/// millisecond per round; returns (client, server) handles.
pub fn connect_accept<N: Nic>(
    sa: &mut Stack<WireEnd>,
    sb: &mut Stack<N>,
    l: TcpListener,
    now: &mut u64,
) -> (TcpStream, TcpStream) {
    let c = sa
        .tcp_connect(SocketAddrV4::new(B, 80), None, *now)
        .unwrap();
    for _ in 0..100 {
        *now += MS;
        pump(sa, sb, *now);
        if let Ok(s) = sb.listener_mut(l).accept(*now) {
            assert_eq!(sa.tcp_mut(c).state(*now), Ok(State::Established));
            return (c, s);
        }
    }
    panic!("no connection");
}
