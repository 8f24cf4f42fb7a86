//! Which core each role of an experiment or benchmark runs on: the one
//! table ([`Role`]) every pinning, `taskset`, `--cpu` argument, RPS mask
//! and per-CPU counter of the lab takes its core number from.
//!
//! The lab is laid out for two cores, 0 and 1 (on a larger machine it
//! still uses only those two). On a machine with one core every role is on
//! core 0: what was placed apart then shares it.
//!
//! | role | two cores | what runs there |
//! |---|---|---|
//! | [`Role::Client`] | 0 | load generators and clients: the LRP and RTU experiments' load thread and the Linux series' "gen" namespace, a benchmark's client or sender, `web`'s kernel clients and load generator |
//! | [`Role::Server`] | 1 | the host or server under test: the LRP and RTU host threads and the Linux series' "host" namespace, a benchmark's server or receiver, `web`'s servers, `lrp-share`'s two applications |
//! | [`Role::Ni`] | 0 | the NI engine of `ni-lrp` when it has a thread of its own (the TAP series): beside the generator, standing for the adapter's processor |
//! | [`Role::Spinner`] | 1 | `rtu-qos`'s CPU-bound competitors (`exp-helper spin`): on the host core they compete for |
//! | [`Role::ShareDaemon`] | 0 | `lrp-share`'s lazynet daemon: beside the client, so that the applications' core holds only what is charged to them |
//! | [`Role::MemnetHost`] | 0 | MemNet's host core: the application (senders, web servers, their RPS) |
//! | [`Role::MemnetOffload`] | 1 | MemNet's offload core: the daemon and what stands in for the network (client, sink, Linux receiver, SQPOLL thread, loopback RPS) |
//! | [`Role::NlfSender`] | 0 | `nlf`'s sender, the send path measured |
//! | [`Role::NlfSink`] | 1 | `nlf`'s discarding sink |
//! | [`Role::SoloTiming`] | 1 | the `paths` study's one-thread timing runs (`taskset`) |
//!
//! `bench multiproc` places its daemon by series: on the server's core
//! ([`Role::Server`]) or on the client's ([`Role::Client`]).
//!
//! **Owns:** the core numbers. **May not touch:** scheduling classes and
//! priorities (each experiment sets its own).

use lazynet::sys::{cpus_online, pin_thread};

/// What a thread or process does in an experiment, for where it runs (see
/// the module docs' table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Load generators and clients.
    Client,
    /// The host or server under test.
    Server,
    /// The `ni-lrp` NI engine on a thread of its own.
    Ni,
    /// `rtu-qos`'s spinning competitors.
    Spinner,
    /// `lrp-share`'s lazynet daemon.
    ShareDaemon,
    /// MemNet's host core (the application).
    MemnetHost,
    /// MemNet's offload core (the daemon, the network's stand-ins).
    MemnetOffload,
    /// `nlf`'s sender.
    NlfSender,
    /// `nlf`'s sink.
    NlfSink,
    /// The `paths` study's one-thread timing runs.
    SoloTiming,
}

impl Role {
    /// Every role, in the table's order.
    #[cfg(test)]
    pub const ALL: [Role; 10] = [
        Role::Client,
        Role::Server,
        Role::Ni,
        Role::Spinner,
        Role::ShareDaemon,
        Role::MemnetHost,
        Role::MemnetOffload,
        Role::NlfSender,
        Role::NlfSink,
        Role::SoloTiming,
    ];

    /// The role's core on a machine with two cores or more.
    pub const fn on_two_cores(self) -> usize {
        match self {
            Role::Client | Role::Ni | Role::ShareDaemon | Role::MemnetHost | Role::NlfSender => 0,
            Role::Server
            | Role::Spinner
            | Role::MemnetOffload
            | Role::NlfSink
            | Role::SoloTiming => 1,
        }
    }

    /// The role's core on this machine: [`Self::on_two_cores`] if the
    /// machine has that core, else core 0.
    pub fn cpu(self) -> usize {
        let c = self.on_two_cores();
        if c < cpus_online() {
            c
        } else {
            0
        }
    }

    /// Pins the calling thread to [`Self::cpu`]; the core, if pinned.
    pub fn pin(self) -> Option<usize> {
        let c = self.cpu();
        pin_thread(c).then_some(c)
    }

    /// [`Self::cpu`] as a CPU mask (`rps_cpus`, one bit per core).
    pub fn mask(self) -> u32 {
        1 << self.cpu()
    }
}

/// The (client, server) cores of a two-thread benchmark: (0, 1), or (0, 0)
/// on one core.
pub fn pair() -> (usize, usize) {
    (Role::Client.cpu(), Role::Server.cpu())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The placement every result was measured with: changing a core here
    /// changes what the experiments measure.
    #[test]
    fn two_core_placement() {
        let table: Vec<(Role, usize)> = Role::ALL.iter().map(|&r| (r, r.on_two_cores())).collect();
        assert_eq!(
            table,
            [
                (Role::Client, 0),
                (Role::Server, 1),
                (Role::Ni, 0),
                (Role::Spinner, 1),
                (Role::ShareDaemon, 0),
                (Role::MemnetHost, 0),
                (Role::MemnetOffload, 1),
                (Role::NlfSender, 0),
                (Role::NlfSink, 1),
                (Role::SoloTiming, 1),
            ]
        );
    }

    #[test]
    fn every_role_is_on_a_core_this_machine_has() {
        for r in Role::ALL {
            assert!(r.cpu() < cpus_online(), "{r:?}");
            assert_eq!(r.mask(), 1 << r.cpu());
        }
        let (c, s) = pair();
        assert_eq!(c, 0);
        assert_eq!(s, if cpus_online() >= 2 { 1 } else { 0 });
        assert_eq!(pair(), lazynet_cli::echo::cpu_pair());
    }
}
