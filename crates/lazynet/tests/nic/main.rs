//! The NIC drivers: the fault injector, gather transmission, the pcap recorder
//! and TAP and AF_XDP against the kernel.

mod fault;
mod gather;
mod gather_tap;
mod pcap;
mod tap;
mod util;
mod xdp;
