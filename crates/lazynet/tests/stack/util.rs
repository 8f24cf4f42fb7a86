//! What the whole-stack tests share: the two stacks' addresses, and
//! injecting raw frames from one end of the in-memory wire.

use std::net::Ipv4Addr;

use lazynet::mem::Desc;
use lazynet::nic::wirepair::WireEnd;
use lazynet::nic::Nic;

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
