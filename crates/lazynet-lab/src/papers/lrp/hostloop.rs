//! What `fairness` and `syn-flood` share around the host runtime
//! ([`lazynet::host`]): the NI engine's step for `ni-lrp` ([`NiStep`]: the
//! load threads call it every turn, on the load core, standing for the
//! adapter's processor), frame sending for load threads ([`send_frames`]),
//! drop summaries ([`drops_line`]), and the load thread's client stack
//! ([`load_client`]). How much of its wall time a thread was on a CPU is
//! [`crate::infra::exp::OnCpu`]'s.
//!
//! **May not touch:** the stack's internals (public API only).

use lazynet::nic::Nic;

use crate::infra::cpus::Role;
use crate::infra::exp;

/// One bounded step of the NI engine (`ni-lrp`), run by a load thread.
pub type NiStep = Box<dyn FnMut() -> usize + Send>;

/// Frames per [`send_frames`] call.
pub const SEND_BATCH: usize = 32;

/// Load side: writes up to `n` (at most [`SEND_BATCH`]) frames with `write`
/// (which fills a buffer and returns the frame length) into buffers of
/// `nic` and sends them; returns how many the NIC took. Unsent buffers go
/// back at once. No allocation: the batch lives on the stack.
pub fn send_frames<N: Nic>(
    nic: &mut N,
    n: usize,
    mut write: impl FnMut(&mut [u8]) -> usize,
) -> usize {
    use lazynet::mem::Desc;
    let n = n.min(SEND_BATCH);
    let mut bufs = [0u32; SEND_BATCH];
    let mut descs = [Desc::default(); SEND_BATCH];
    let got = nic.alloc(&mut bufs[..n]);
    let area = nic.buffers_mut();
    let mut ready = 0;
    for &b in &bufs[..got] {
        let len = area.buf_mut(b).map_or(0, &mut write);
        descs[ready] = Desc::new(b, len as u16);
        ready += 1;
    }
    let k = nic.send(&descs[..ready]);
    if k < ready {
        nic.release(&descs[k..ready]);
    }
    nic.flush();
    k
}

/// The non-zero drop counters of a stack on one line (`name=count ...`),
/// or `none`.
pub fn drops_line(st: &lazynet::stack::StackStats) -> String {
    let mut out = String::new();
    for r in lazynet::demux::DropReason::ALL {
        let v = st.demux.drops_for(r);
        if v != 0 {
            out.push_str(&format!("demux.{}={v} ", r.name()));
        }
    }
    for r in lazynet::stack::StackDrop::ALL {
        let v = st.drops_for(r);
        if v != 0 {
            out.push_str(&format!("stack.{}={v} ", r.name()));
        }
    }
    if out.is_empty() {
        out.push_str("none");
    }
    out.trim_end().to_string()
}

/// The load thread's start: pinned to the load CPU and boosted, with a
/// lazynet client stack at `client` on the wire end `end` that reaches the
/// host `host` (MAC `host_mac`) without ARP. `seed` keeps the experiments'
/// client stacks apart.
pub fn load_client(
    end: lazynet::nic::wirepair::WireEnd,
    client: std::net::Ipv4Addr,
    host: std::net::Ipv4Addr,
    host_mac: [u8; 6],
    seed: u64,
) -> lazynet::stack::Stack<lazynet::nic::wirepair::WireEnd> {
    Role::Client.pin();
    exp::boost();
    let mut s = lazynet::stack::Stack::new(
        end,
        lazynet::stack::StackConfig {
            addr: client,
            seed,
            ..lazynet::stack::StackConfig::default()
        },
    );
    s.set_neighbor(host, host_mac);
    s
}
