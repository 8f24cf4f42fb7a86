//! The NIC drivers: the fault injector, gather transmission, the pcap recorder
//! and TAP against the kernel.

mod fault;
mod gather;
mod gather_tap;
mod pcap;
mod tap;
mod util;
