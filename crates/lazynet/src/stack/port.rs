//! The daemon's interface to its own stack ([`DaemonPort`]): a stack that
//! demultiplexes for other processes besides running its own sockets.
//!
//! **Owns:** nothing; it names the few things the daemon (`crate::daemon`)
//! does to its stack that an application does not — bind other
//! processes' sockets in the classifier, finish a batch it received and
//! classified itself, free what it took off a channel, read a datagram it
//! reassembled for another process, reset a dead process's connection —
//! so that the daemon has no other way in than the public API and this.
//!
//! **May not touch:** protocol state (the stack's own calls do the work).

use std::net::{Ipv4Addr, SocketAddrV4};

use super::Stack;
use crate::demux::{ChannelId, Classifier};
use crate::mem::Desc;
use crate::nic::Nic;

/// See the module docs: `stack.daemon_port()`.
pub(crate) struct DaemonPort<'a, N: Nic>(&'a mut Stack<N>);

impl<N: Nic> Stack<N> {
    /// The daemon's interface to this stack.
    pub(crate) fn daemon_port(&mut self) -> DaemonPort<'_, N> {
        DaemonPort(self)
    }
}

impl<'a, N: Nic> DaemonPort<'a, N> {
    /// The classifier, where the daemon binds other processes' sockets.
    pub(crate) fn classifier(self) -> &'a mut Classifier {
        &mut self.0.demux
    }

    /// After a batch the daemon received and classified itself: control,
    /// fragments and timers, then releases and the NIC's flush. Returns
    /// the frames processed.
    pub(crate) fn after_batch(&mut self, now: u64) -> usize {
        self.0.poll_queued(now)
    }

    /// Frees one entry the daemon took off a channel of this stack's
    /// classifier (counted as the socket's close).
    pub(crate) fn release(&mut self, d: Desc) {
        self.0.release_queued(d)
    }

    /// Takes the oldest datagram this stack reassembled for another
    /// process's socket on channel `c` and copies it into `out` (see
    /// `Stack::pop_reassembled`).
    pub(crate) fn pop_reassembled(
        &mut self,
        c: ChannelId,
        out: &mut [u8],
    ) -> Option<(usize, Ipv4Addr, Ipv4Addr)> {
        self.0.pop_reassembled(c, out)
    }

    /// Resets, within a round trip, the connection `local`–`remote` of a
    /// process that died (see `Stack::tcp_probe_dead`).
    pub(crate) fn probe_dead(&mut self, local: SocketAddrV4, remote: SocketAddrV4, now: u64) {
        self.0.tcp_probe_dead(local, remote, now)
    }
}
