//! The `lazynet` program against real peers: the Linux kernel in a network
//! namespace over TAP (root), and a second lazynet process on the in-memory
//! wire. Every namespace and device gets a unique name and is removed by a
//! guard even when a test fails.

use std::io::BufReader;
use std::process::{Command, Stdio};

use crate::util::*;
use lazynet::nic::netns::list_netns;

pub(crate) const UDP_CLIENT: &str = r#"
import socket, sys
dst = (sys.argv[1], 7)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2.0)
sizes = [1, 8000] + [1 + (i * 7919) % 8000 for i in range(998)]
ok = 0
for i, n in enumerate(sizes):
    data = bytes((i + j * 31) % 256 for j in range(n))
    for attempt in range(3):
        s.sendto(data, dst)
        try:
            r, a = s.recvfrom(65536)
        except socket.timeout:
            continue
        if r != data or a != dst:
            print("mismatch", i, n, len(r)); sys.exit(1)
        ok += 1
        break
print("echoed", ok)
sys.exit(0 if ok == len(sizes) else 1)
"#;

/// From the peer namespace: three pings answered (ARP and ICMP), then
/// 1000 datagrams of 1..8000 bytes echoed byte-exact ([`UDP_CLIENT`];
/// large ones fragmented by Linux and by us).
pub(crate) fn ping_and_udp_echo(names: &Names) {
    let ping = in_ns(&names.ns, &["ping", "-c", "3", "-W", "2", &names.ours()]);
    let text = String::from_utf8_lossy(&ping.stdout);
    assert!(
        ping.status.success() && text.contains("3 received"),
        "{text}"
    );
    let udp = in_ns(&names.ns, &["python3", "-c", UDP_CLIENT, &names.ours()]);
    let text = String::from_utf8_lossy(&udp.stdout);
    assert!(
        udp.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&udp.stderr)
    );
    assert!(text.contains("echoed 1000"), "{text}");
}

/// `tcpdump -vv` of a [`ping_and_udp_echo`] shows a verified UDP checksum
/// for every datagram it can verify — the unfragmented ones (up to 1472
/// bytes), in both directions — and ICMP echo replies.
pub(crate) fn assert_echo_verified(dump: &str) {
    let small = [1usize, 8000]
        .into_iter()
        .chain((0..998).map(|i| 1 + (i * 7919) % 8000))
        .filter(|&n| n <= 1472)
        .count();
    let ok = dump.matches("udp sum ok").count();
    assert!(
        ok >= 2 * small,
        "{ok} verified UDP checksums, expected {}",
        2 * small
    );
    assert!(dump.contains("ICMP echo reply"));
}

#[test]
fn kernel_pings_and_exchanges_udp_over_tap() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let names = Names::new();
    let pcap = std::env::temp_dir().join(format!("{}.pcap", names.ns));
    let mut child = Command::new(BIN)
        .args(["serve", "udp-echo", "--nic", "tap", "--pcap"])
        .arg(&pcap)
        .args(names.args())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut guard = Cleanup {
        child: Some(child),
        ns: Some(names.ns.clone()),
    };
    wait_ready(&mut out);

    ping_and_udp_echo(&names);

    // Clean exit on SIGTERM, counters printed, namespace and device removed.
    let mut child = guard.child.take().unwrap();
    signal(&child, libc::SIGTERM);
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(status.success(), "exit {status}: {rest}");
    assert!(
        rest.contains("udp_delivered_reassembled") && rest.contains("icmp_echo_replies"),
        "{rest}"
    );
    assert_removed(&names);

    // The capture reads cleanly and every checksum tcpdump can verify is right.
    let td = Command::new("tcpdump")
        .args(["-r"])
        .arg(&pcap)
        .args(["-nn", "-vv"])
        .output()
        .expect("tcpdump");
    let text = String::from_utf8_lossy(&td.stdout);
    let err = String::from_utf8_lossy(&td.stderr);
    assert!(td.status.success(), "{err}");
    assert!(
        !text.contains("bad") && !text.contains("incorrect") && !err.contains("truncated"),
        "{text}"
    );
    assert_echo_verified(&text);
    let _ = std::fs::remove_file(&pcap);
    drop(guard);
}

#[test]
fn netns_up_then_serve_attaches_and_leaves_it_in_place() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let names = Names::new();
    let mut guard = Cleanup {
        child: None,
        ns: Some(names.ns.clone()),
    };
    let ns_args = names.ns_args();
    let up = Command::new(BIN)
        .args(["netns", "up"])
        .args(&ns_args)
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    assert!(list_netns().unwrap().contains(&names.ns));
    for round in 0..2 {
        let mut child = Command::new(BIN)
            .args(["serve", "udp-echo", "--nic", "tap"])
            .args(names.args())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        guard.child = Some(child);
        wait_ready(&mut out);
        let ping = in_ns(&names.ns, &["ping", "-c", "1", "-W", "3", &names.ours()]);
        assert!(
            ping.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&ping.stdout)
        );
        let mut child = guard.child.take().unwrap();
        signal(&child, libc::SIGINT);
        assert!(child.wait().unwrap().success());
        assert!(
            list_netns().unwrap().contains(&names.ns),
            "attached server must leave the namespace"
        );
    }
    let down = Command::new(BIN)
        .args(["netns", "down"])
        .args(&ns_args)
        .output()
        .unwrap();
    assert!(down.status.success());
    assert!(!list_netns().unwrap().contains(&names.ns));
}

#[test]
fn second_process_on_the_in_memory_wire() {
    wire_echo(&[], 20000);
}

/// The same with the server in the `ni-lrp` receive mode: its NI thread
/// demultiplexes, the host thread echoes; stopped and joined on SIGTERM.
/// Fewer echoes: each takes one more thread hop (NI → host → NI), which on
/// a loaded two-core machine costs scheduler slices (tens of ms).
#[test]
fn second_process_on_the_in_memory_wire_ni_lrp() {
    wire_echo(&["--mode", "ni-lrp"], 500);
}

fn wire_echo(mode: &[&str], count: u32) {
    let mut child = Command::new(BIN)
        .args(["serve", "udp-echo", "--nic", "wire"])
        .args(mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut guard = Cleanup {
        child: Some(child),
        ns: None,
    };
    let lines = wait_ready(&mut out);
    let path = lines
        .iter()
        .find_map(|l| l.strip_prefix("wire "))
        .expect("wire path line")
        .to_string();
    let c = Command::new(BIN)
        .args(["udp-client", "--wire", &path, "--count", &count.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&c.stdout);
    assert!(
        c.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&c.stderr)
    );
    assert!(text.starts_with(&format!("{count} echoes")), "{text}");
    let child = guard.child.take().unwrap();
    signal(&child, libc::SIGTERM);
    let mut child = child;
    assert!(child.wait().unwrap().success());
}
