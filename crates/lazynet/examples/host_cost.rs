//! Host-runtime cost per datagram, without threads or noise: a UDP server
//! that only receives, fed 512 frames at a time from the same thread;
//! prints ns per datagram (sender's writes included) and the per-owner
//! accounting for each receive mode — the receive loop's cost per frame
//! beside the server's, which is what decides where eager livelocks.
//! `cargo run --release --example host_cost`.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Instant;

use lazynet::host::{Host, HostConfig, HostState};
use lazynet::mem::Desc;
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::nic::Nic;
use lazynet::sched::{Class, Cx, Status, TscClock};
use lazynet::stack::{ReceiveMode, Stack, StackConfig};

fn main() {
    for mode in [
        ReceiveMode::Eager,
        ReceiveMode::EarlyDemux,
        ReceiveMode::SoftLrp,
    ] {
        let (mut a, b) = WirePair::new(WireConfig {
            buf_count: 8192,
            ring_capacity: 1024,
            ..WireConfig::default()
        })
        .unwrap();
        let stack = Stack::new(
            b,
            StackConfig {
                addr: Ipv4Addr::new(10, 201, 0, 2),
                mode,
                ..StackConfig::default()
            },
        );
        let mut host: Host<WireEnd, u64> =
            Host::new(stack, 0, TscClock::new(), HostConfig::for_mode(mode)).unwrap();
        let o = host.add_owner("srv", Class::BestEffort).unwrap();
        let h = host
            .state_mut()
            .stack
            .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7000), Some(1024))
            .unwrap();
        let t = host
            .spawn(
                o,
                move |_cx: &mut Cx<'_>, st: &mut HostState<WireEnd, u64>| match st
                    .stack
                    .udp_mut(h)
                    .recv_with(|_, _| ())
                {
                    Ok(()) => {
                        st.app += 1;
                        Status::Ready
                    }
                    Err(_) => Status::Wait,
                },
            )
            .unwrap();
        host.state_mut().register_udp(h, o, t);
        // A valid frame from a template stack.
        let frame = {
            let (x, mut y) = WirePair::new(WireConfig::default()).unwrap();
            let mut s = Stack::new(
                x,
                StackConfig {
                    addr: Ipv4Addr::new(10, 201, 0, 1),
                    ..StackConfig::default()
                },
            );
            s.set_neighbor(Ipv4Addr::new(10, 201, 0, 2), [2, 0, 0, 0, 0, 2]);
            let u = s
                .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 40000), None)
                .unwrap();
            s.udp_mut(u)
                .send_to(
                    &[0u8; 18],
                    SocketAddrV4::new(Ipv4Addr::new(10, 201, 0, 2), 7000),
                    0,
                )
                .unwrap();
            s.poll(0);
            let mut d = [Desc::default(); 1];
            let n = y.recv(&mut d);
            assert_eq!(n, 1);
            y.buffers().frame(d[0]).unwrap().to_vec()
        };
        let mut total = 0u64;
        let t0 = Instant::now();
        for _ in 0..500 {
            let mut bufs = [0u32; 512];
            let n = a.alloc(&mut bufs);
            let mut ds = [Desc::default(); 512];
            for i in 0..n {
                a.buffers_mut().buf_mut(bufs[i]).unwrap()[..frame.len()].copy_from_slice(&frame);
                ds[i] = Desc::new(bufs[i], frame.len() as u16);
            }
            let k = a.send(&ds[..n]);
            total += k as u64;
            host.run_until_idle(100_000);
        }
        let ns = t0.elapsed().as_nanos() as f64;
        println!(
            "{:<12} {} datagrams, {:.0} ns each (incl. the sender's writes); delivered {}",
            mode.name(),
            total,
            ns / total as f64,
            host.app()
        );
        println!("{}", host.report());
    }
}
