//! Where the cycles of the NLF send path go, on one core (no cross-core
//! traffic): the v3 header build alone, then the whole send path (streamer,
//! buffer allocation, gather descriptors on the in-memory wire) with the
//! discarding peer in the same thread. `lazynet-lab nlf` measures the same
//! path with the peer on the other core.
//!
//! `cargo run --release -p lazynet --example nlf_path_cost`

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Instant;

use lazynet::mem::MappedFile;
use lazynet::nic::wirepair::{WireConfig, WirePair};
use lazynet::nlf::paths::{self, ClientConfig, ClientHeader};
use lazynet::nlf::stream::{StreamConfig, Streamer, BATCH};
use lazynet::nlf::{prebuild_with, MetaFile, PacketMeta, PrebuildOptions};
use lazynet::stack::{Stack, StackConfig};
use lazynet::wire::EthernetAddress;

fn main() {
    let client = SocketAddrV4::new(Ipv4Addr::new(10, 201, 0, 1), 5000);
    let cfg = ClientConfig {
        src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
        src_ip: Ipv4Addr::new(10, 201, 0, 2),
        dst_ip: *client.ip(),
        src_port: 5004,
        dst_port: client.port(),
        ttl: 64,
        dont_frag: false,
        rtp: None,
    };
    let mut h = ClientHeader::new(cfg, 1);
    let mut bufs = vec![0u8; 1024 * 2048];
    let n = 20_000_000u64;
    let t = Instant::now();
    for i in 0..n {
        let p = PacketMeta {
            offset: i * 1024,
            len: 1024,
            sum: (i as u32).wrapping_mul(2_654_435_761),
            send_ns: i,
            rtp_ts: 0,
            rtp_seq: i as u32,
        };
        let b = (i as usize % 1024) * 2048;
        // The buffer is opaque to the optimizer, so the header stores stay.
        let out = std::hint::black_box(&mut bufs[b..b + 2048]);
        let _ = std::hint::black_box(paths::v3(&mut h, std::hint::black_box(&p), out));
    }
    println!(
        "v3 header build alone:                     {:.2} ns/packet",
        t.elapsed().as_nanos() as f64 / n as f64
    );

    let dir = std::env::temp_dir().join(format!("nlf-path-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let media = dir.join("media.bin");
    std::fs::write(
        &media,
        (0..8u32 << 20)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect::<Vec<u8>>(),
    )
    .expect("write media");
    let opts = PrebuildOptions {
        payload: 1024,
        rtp: false,
        out_dir: Some(&dir),
        nominal_bit_rate: 3_000_000,
    };
    let sum = prebuild_with(&media, &opts, &mut |_, _| {}).expect("prebuild");
    let meta = MetaFile::open(&sum.meta, &media).expect("meta");
    let m = MappedFile::open(&media).expect("map");
    let wire = WireConfig {
        ext_bytes: m.bytes().len() as u64,
        buf_count: 2048,
        ring_capacity: 512,
        ..WireConfig::default()
    };
    let (a, mut b) = WirePair::new(wire).expect("wire");
    let mut stack = Stack::new(
        a,
        StackConfig {
            addr: cfg.src_ip,
            ..StackConfig::default()
        },
    );
    stack.set_neighbor(*client.ip(), cfg.dst_mac.0);
    let mut s = Streamer::new(meta, m, &[client], StreamConfig::default()).expect("streamer");
    s.attach(&mut stack);
    s.poll(&mut stack, 0);
    s.rewind();
    for round in 0..2 {
        let t = Instant::now();
        let mut sent = 0u64;
        while sent < 5_000_000 {
            if s.finished() {
                s.rewind();
            }
            sent += s.send_batch(&mut stack, 0, BATCH) as u64;
            b.discard(2 * BATCH);
        }
        println!(
            "send path + discarding peer, one thread (round {round}): {:.2} ns/packet",
            t.elapsed().as_nanos() as f64 / sent as f64
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
