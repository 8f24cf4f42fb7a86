//! The streamer on a periodic handler (RTU §III-D, media on demand): a
//! host whose only real-time owner is the streams' handler sends a short
//! stream to many clients over the in-memory wire, ARP resolved by the
//! stack itself; every client receives every byte, in order, and the
//! handler was released by the executor period after period. And the RTP
//! header each client gets (RFC 3550 §5.1).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;

use lazynet::host::{Host, HostConfig, HostState};
use lazynet::mem::MappedFile;
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::nlf::stream::{StreamConfig, Streamer, BATCH_COST_NS, PERIOD_NS};
use lazynet::nlf::{prebuild_with, MetaFile, PrebuildOptions};
use lazynet::sched::{Class, Cx, InstantClock};
use lazynet::socket::UdpSocket;
use lazynet::stack::{ReceiveMode, Stack, StackConfig};

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const CLIENTS: u16 = 40;

/// A media file of `kib` KiB in a fresh folder `dir`, prebuilt at 8
/// Mbit/s in 1316-byte payloads (with RTP headers if `rtp`); its bytes
/// differ from packet to packet (1316 is not a multiple of 251). Returns
/// its path, bytes and meta file.
fn prebuilt(dir: &std::path::Path, kib: usize, rtp: bool) -> (PathBuf, Vec<u8>, MetaFile) {
    std::fs::create_dir_all(dir).unwrap();
    let media_path = dir.join("media.bin");
    let media: Vec<u8> = (0..kib * 1024).map(|i| (i % 251) as u8).collect();
    std::fs::write(&media_path, &media).unwrap();
    let sum = prebuild_with(
        &media_path,
        &PrebuildOptions {
            payload: 1316,
            rtp,
            out_dir: Some(dir),
            nominal_bit_rate: 8_000_000,
        },
        &mut |_, _| {},
    )
    .unwrap();
    let meta = MetaFile::open(&sum.meta, &media_path).unwrap();
    (media_path, media, meta)
}

/// The server's and the client's stack on the two ends of `wire`.
fn server_and_client(wire: WireConfig) -> (Stack<WireEnd>, Stack<WireEnd>) {
    let (a, b) = WirePair::new(wire).unwrap();
    let cfg = |addr, seed| StackConfig {
        addr,
        seed,
        ..StackConfig::default()
    };
    (Stack::new(a, cfg(SERVER, 1)), Stack::new(b, cfg(CLIENT, 2)))
}

#[test]
fn a_periodic_handler_streams_every_byte_to_every_client() {
    let dir = std::env::temp_dir().join(format!("lazynet-stream-{}", std::process::id()));
    // 96 KiB at 8 Mbit/s: about 0.1 s of stream per client.
    let (media_path, media, meta) = prebuilt(&dir, 96, false);
    let mapped = MappedFile::open(&media_path).unwrap();
    let (server, mut client) = server_and_client(WireConfig {
        ext_bytes: media.len() as u64,
        buf_count: 4096,
        ..WireConfig::default()
    });
    let addrs: Vec<SocketAddrV4> = (0..CLIENTS)
        .map(|i| SocketAddrV4::new(CLIENT, 6000 + i))
        .collect();
    let socks: Vec<UdpSocket> = addrs
        .iter()
        .map(|&x| UdpSocket::bind(&mut client, x).unwrap())
        .collect();

    let packets = meta.packets();
    let mut streamer = Streamer::new(meta, mapped, &addrs, StreamConfig::default()).unwrap();
    let mut server = server;
    assert!(streamer.attach(&mut server), "payloads by reference");
    let class = streamer.periodic(PERIOD_NS, BATCH_COST_NS);
    let hcfg = HostConfig::for_mode(ReceiveMode::SoftLrp);
    let mut h = Host::new(server, streamer, InstantClock::new(), hcfg).unwrap();
    let o = h.add_owner("media", Class::Periodic(class)).unwrap();
    let mut done = false;
    h.spawn(
        o,
        |cx: &mut Cx<'_>, st: &mut HostState<WireEnd, Streamer<MappedFile>>| {
            st.app.serve_period(&mut st.stack, cx)
        },
    )
    .unwrap();

    let mut got: Vec<Vec<u8>> = vec![Vec::new(); CLIENTS as usize];
    let mut buf = vec![0u8; 2048];
    let t0 = std::time::Instant::now();
    // Until every client has the whole stream (a bound of 10 s).
    while t0.elapsed() < std::time::Duration::from_secs(10) {
        h.run_for(500_000);
        let now = client.now();
        client.poll(now);
        for (i, s) in socks.iter().enumerate() {
            while let Ok((n, _)) = s.recv_from(&mut client, &mut buf) {
                got[i].extend_from_slice(&buf[..n]);
            }
        }
        if h.app().finished() {
            if done && got.iter().all(|g| g.len() >= media.len()) {
                break;
            }
            done = true;
        }
    }
    for (i, g) in got.iter().enumerate() {
        assert_eq!(g.len(), media.len(), "client {i}: bytes received");
        assert!(g == &media, "client {i}: the stream differs");
    }
    // Released every period while it was periodic. (A build without
    // optimisations overruns the declared cost and is demoted: it keeps
    // streaming on its period as a timer, which the bytes above show.)
    let u = h.usage(o);
    assert!(u.releases > 0 && u.runs > 10, "released: {u:?}");
    let stats = h.app().stats();
    assert_eq!(stats.packets, (packets * CLIENTS as usize) as u64);
    let (mut stack, mut s) = h.into_parts();
    s.release(&mut stack);
    let _ = std::fs::remove_dir_all(&dir);
}

/// RFC 3550 §5.1: each client's stream has an SSRC, an initial sequence
/// number and an initial timestamp of its own, drawn at random; then its
/// sequence counts up by one per packet under that SSRC.
#[test]
fn each_client_gets_its_own_random_rtp_ssrc_sequence_and_timestamp() {
    let dir = std::env::temp_dir().join(format!("lazynet-rtp-{}", std::process::id()));
    let (_, media, meta) = prebuilt(&dir, 64, true);
    let (mut server, mut client) = server_and_client(WireConfig::default());
    const N: u16 = 8;
    let addrs: Vec<SocketAddrV4> = (0..N)
        .map(|i| SocketAddrV4::new(CLIENT, 7000 + i))
        .collect();
    let socks: Vec<UdpSocket> = addrs
        .iter()
        .map(|&x| UdpSocket::bind(&mut client, x).unwrap())
        .collect();
    let mut streamer =
        Streamer::new(meta, media.as_slice(), &addrs, StreamConfig::default()).unwrap();
    // Per client: (SSRC, sequence number, timestamp) of each packet.
    let mut got: Vec<Vec<(u32, u16, u32)>> = vec![Vec::new(); N as usize];
    let mut buf = vec![0u8; 2048];
    let mut now = 0;
    while got.iter().any(|g| g.len() < 4) {
        now += 1_000_000;
        assert!(
            now < 5_000_000_000,
            "packets: {:?}",
            got.iter().map(Vec::len).collect::<Vec<_>>()
        );
        server.poll(now);
        streamer.poll(&mut server, now);
        client.poll(now);
        for (i, s) in socks.iter().enumerate() {
            while let Ok((n, _)) = s.recv_from(&mut client, &mut buf) {
                assert!(n >= 12 && buf[0] >> 6 == 2, "not RTP version 2");
                let seq = u16::from_be_bytes([buf[2], buf[3]]);
                let ts = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
                let ssrc = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]);
                got[i].push((ssrc, seq, ts));
            }
        }
        server.poll(now);
    }
    for (i, g) in got.iter().enumerate() {
        for w in g.windows(2) {
            assert_eq!(w[1].0, w[0].0, "client {i}: SSRC changed");
            assert_eq!(w[1].1, w[0].1.wrapping_add(1), "client {i}: sequence");
        }
    }
    let distinct = |f: &dyn Fn(&(u32, u16, u32)) -> u64| {
        let mut v: Vec<u64> = got.iter().map(|g| f(&g[0])).collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    };
    assert_eq!(distinct(&|p| u64::from(p.0)), N as usize, "SSRCs shared");
    // Sixteen- and 32-bit draws: 8 clients collide with small chance only.
    assert!(
        distinct(&|p| u64::from(p.1)) >= N as usize - 1,
        "initial sequence numbers"
    );
    assert!(
        distinct(&|p| u64::from(p.2)) >= N as usize - 1,
        "initial timestamps"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
