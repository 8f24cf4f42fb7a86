//! A UDP echo server on lazynet, driven by readiness.
//!
//! ```text
//! cargo run --release --example udp_echo                 # the in-memory wire
//! sudo cargo run --release --example udp_echo -- --nic tap   # or xdp
//! ```
//!
//! On the wire a client stack in this process sends datagrams of varied
//! sizes; on `tap`/`xdp` the Linux kernel in a namespace the example
//! creates is the client. Every echo is checked (length, bytes, order);
//! the example exits 0 only if all came back.

mod common;

use std::net::{SocketAddrV4, UdpSocket as KernelUdp};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use common::NicKind;
use lazynet::nic::wirepair::{WireConfig, WirePair};
use lazynet::nic::Nic;
use lazynet::socket::UdpSocket;
use lazynet::stack::ready::{Interest, Trigger};
use lazynet::stack::Stack;

#[derive(Parser)]
struct Args {
    /// Where the server's stack runs.
    #[arg(long, value_enum, default_value = "wire")]
    nic: NicKind,
    /// Datagrams the client sends (one at a time, each waiting for its
    /// echo).
    #[arg(long, default_value_t = 20_000)]
    count: usize,
}

const PORT: u16 = 7;

/// The server: one socket, registered for readability; each turn receives,
/// takes the ready set and echoes what is queued, then sleeps on the NIC.
fn serve<N: Nic>(stack: &mut Stack<N>, stop: &AtomicBool) -> anyhow::Result<u64> {
    let addr = SocketAddrV4::new(stack.addr(), PORT);
    let sock = UdpSocket::bind(stack, addr)?;
    stack.register(sock, 0, Interest::READABLE, Trigger::Level)?;
    let mut events = Vec::new();
    let mut echoed = 0u64;
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        let now = stack.now();
        let rx = stack.poll(now).received;
        events.clear();
        stack.ready(&mut events, 64);
        for _ in &events {
            // Bounded: what is queued now, at most the channel's capacity.
            while let Ok((n, from)) = sock.recv_from(stack, &mut buf) {
                sock.send_to_blocking(stack, &buf[..n], from, Some(Duration::from_secs(1)))?;
                echoed += 1;
            }
        }
        if rx == 0 && events.is_empty() {
            let wake = stack.next_deadline().map(|t| t.saturating_sub(now));
            stack
                .nic_mut()
                .wait(Some(wake.unwrap_or(1_000_000).min(1_000_000)));
        }
    }
    Ok(echoed)
}

fn size_of(i: usize) -> usize {
    1 + (i * 97) % 1400
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let stop = Arc::new(AtomicBool::new(false));
    let mut rtts = Vec::with_capacity(args.count);
    let t0 = Instant::now();
    let echoed = match args.nic {
        NicKind::Wire => {
            let (a, b) = WirePair::new(WireConfig::default())?;
            let s = stop.clone();
            let server = std::thread::spawn(move || {
                let mut st = Stack::new(b, common::config(common::WIRE_OURS, common::seed()));
                serve(&mut st, &s)
            });
            let mut st = Stack::new(a, common::config(common::WIRE_PEER, common::seed()));
            let client = UdpSocket::bind(&mut st, SocketAddrV4::new(common::WIRE_PEER, 5000))?;
            let dst = SocketAddrV4::new(common::WIRE_OURS, PORT);
            let mut buf = [0u8; 2048];
            let t = Some(Duration::from_secs(2));
            for i in 0..args.count {
                let msg = common::pattern(i, size_of(i), i as u8);
                let s0 = Instant::now();
                client.send_to_blocking(&mut st, &msg, dst, t)?;
                let (n, from) = client.recv_from_blocking(&mut st, &mut buf, t)?;
                rtts.push(s0.elapsed().as_nanos() as u64);
                anyhow::ensure!(from == dst && buf[..n] == msg[..], "echo {i} wrong");
            }
            stop.store(true, Ordering::Relaxed);
            server
                .join()
                .map_err(|_| anyhow::anyhow!("server panicked"))??
        }
        kind => {
            let (mut st, peer) = common::kernel_peer(kind, 41)?;
            let dst = SocketAddrV4::new(peer.ours, PORT);
            let (ns, count, s) = (peer.ns.clone(), args.count, stop.clone());
            let client = std::thread::spawn(move || {
                let r = lazynet::nic::netns::run_in_netns(&ns, move || {
                    let sock = KernelUdp::bind("0.0.0.0:0")?;
                    sock.set_read_timeout(Some(Duration::from_secs(2)))?;
                    let mut rtts = Vec::with_capacity(count);
                    let mut buf = [0u8; 2048];
                    for i in 0..count {
                        let msg = common::pattern(i, size_of(i), i as u8);
                        let s0 = Instant::now();
                        sock.send_to(&msg, dst)?;
                        let (n, _) = sock.recv_from(&mut buf)?;
                        rtts.push(s0.elapsed().as_nanos() as u64);
                        if buf[..n] != msg[..] {
                            return Err(std::io::Error::other(format!("echo {i} wrong")));
                        }
                    }
                    Ok(rtts)
                });
                s.store(true, Ordering::Relaxed);
                r
            });
            let echoed = serve(&mut st, &stop)?;
            rtts = client
                .join()
                .map_err(|_| anyhow::anyhow!("client panicked"))??;
            drop(st);
            drop(peer);
            echoed
        }
    };
    anyhow::ensure!(
        echoed as usize == args.count && rtts.len() == args.count,
        "{echoed} echoed, {} round trips of {}",
        rtts.len(),
        args.count
    );
    println!(
        "udp echo over {:?}: {} datagrams of 1..1400 bytes, every one checked, in {:.2} s; round trip p50 {:.1} µs, p99 {:.1} µs",
        args.nic,
        args.count,
        t0.elapsed().as_secs_f64(),
        common::percentile_us(&mut rtts, 50.0),
        common::percentile_us(&mut rtts, 99.0),
    );
    Ok(())
}
