//! Whole stacks: hostile input, simulated networks, the ni-lrp mode end to end,
//! TCP through two stacks.

mod bad_input;
mod netsim;
mod ni_lrp;
mod ready;
mod server;
mod tcp;
mod tcp_bad_input;
mod tcp_burst;
mod tcp_netsim;
mod tcp_orphans;
