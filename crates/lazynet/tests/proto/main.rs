//! The sans-IO protocols other than TCP: ARP, ICMP rate limits and rules, IPv4
//! reassembly and fragmentation, UDP ports.

mod arp;
mod icmp;
mod ip;
mod udp;
