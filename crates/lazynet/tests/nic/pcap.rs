//! PcapNic: files that tcpdump reads, both directions recorded, write errors
//! do not break the data path.

use std::io::{self, Write};
use std::process::Command;

use lazynet::mem::Desc;
use lazynet::nic::pcap::{PcapNic, Resolution};
use lazynet::nic::Nic;

use crate::util::Mock;

fn udp_frame(i: u16, payload_len: usize) -> Vec<u8> {
    let payload = vec![i as u8; payload_len];
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])
        .ipv4([10, 0, 0, 2], [10, 0, 0, 1], 64)
        .udp(40000 + i, 7);
    let mut v = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut v, &payload).unwrap();
    v
}

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("lazynet-{}-{name}.pcap", std::process::id()))
}

fn tcpdump_available() -> bool {
    let ok = Command::new("tcpdump").arg("--version").output().is_ok();
    if !ok {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "tcpdump must be installed under CI"
        );
        println!("skipped: tcpdump missing");
    }
    ok
}

/// Runs `tcpdump -r file -nn -vv`; asserts a clean read; returns the packet
/// count (lines that start a packet, i.e. not indented continuation lines).
fn tcpdump_count(path: &std::path::Path) -> usize {
    let out = Command::new("tcpdump")
        .arg("-r")
        .arg(path)
        .args(["-nn", "-vv"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tcpdump failed: {stderr}");
    assert!(stderr.contains("EN10MB"), "not Ethernet: {stderr}");
    for bad in ["truncated", "bad", "invalid"] {
        assert!(
            !stdout.contains(bad) && !stderr.contains(bad),
            "tcpdump complains ({bad}): {stdout}{stderr}"
        );
    }
    stdout
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with([' ', '\t']))
        .count()
}

/// Receives `n` frames and echoes them back through the recorder.
fn echo_through<W: Write>(nic: &mut PcapNic<Mock, W>, n: usize) -> usize {
    for i in 0..n {
        nic.inner_mut().inject(&udp_frame(i as u16, 18 + i * 50));
    }
    let mut out = [Desc::default(); 8];
    let mut echoed = 0;
    loop {
        let k = nic.recv(&mut out);
        if k == 0 {
            break;
        }
        let s = nic.send(&out[..k]);
        nic.release(&out[s..k]);
        echoed += s;
    }
    echoed
}

#[test]
fn pcap_both_directions_read_by_tcpdump() {
    for (res, name) in [(Resolution::Micro, "us"), (Resolution::Nano, "ns")] {
        let path = tmp(name);
        let mut nic = PcapNic::create(Mock::new(64), &path, res).unwrap();
        assert_eq!(echo_through(&mut nic, 20), 20);
        nic.flush();
        let st = nic.stats();
        assert_eq!((st.rx_frames, st.tx_frames, st.frames), (20, 20, 40));
        assert_eq!(st.write_errors, 0);
        assert_eq!(nic.inner().sent.len(), 20);
        drop(nic);
        if tcpdump_available() {
            assert_eq!(tcpdump_count(&path), 40, "{name}");
        }
        let _ = std::fs::remove_file(&path);
    }
}

#[test]
fn pcap_records_only_accepted_prefix_and_flushes_on_drop() {
    let path = tmp("prefix");
    {
        let mut mock = Mock::new(16);
        mock.tx_cap = 2;
        let mut nic = PcapNic::create(mock, &path, Resolution::Micro).unwrap();
        let mut bufs = [0u32; 5];
        assert_eq!(nic.alloc(&mut bufs), 5);
        let mut descs = [Desc::default(); 5];
        for (i, b) in bufs.iter().enumerate() {
            let f = udp_frame(i as u16, 30);
            nic.buffers_mut().buf_mut(*b).unwrap()[..f.len()].copy_from_slice(&f);
            descs[i] = Desc::new(*b, f.len() as u16);
        }
        assert_eq!(nic.send(&descs), 2);
        assert_eq!(nic.send(&descs[2..]), 2);
        assert_eq!(nic.stats().tx_frames, 4);
        nic.release(&descs[4..]);
        // An invalid descriptor is passed on but not recorded.
        let bad = Desc::new(9999, 10);
        let _ = nic.send(&[bad]);
        assert_eq!(nic.stats().tx_frames, 4);
        // no explicit flush: Drop must flush
    }
    if tcpdump_available() {
        assert_eq!(tcpdump_count(&path), 4);
    }
    let _ = std::fs::remove_file(&path);
}

/// Accepts `budget` bytes, then fails every write.
struct FailAfter {
    budget: usize,
}
impl Write for FailAfter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if b.len() > self.budget {
            return Err(io::Error::other("disk full"));
        }
        self.budget -= b.len();
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn pcap_write_error_does_not_break_data_path() {
    let w = FailAfter { budget: 24 + 200 };
    let mut nic = PcapNic::with_writer(Mock::new(64), w, Resolution::Micro).unwrap();
    assert!(nic.recording());
    assert_eq!(echo_through(&mut nic, 30), 30);
    assert_eq!(nic.inner().sent.len(), 30, "every frame still went through");
    let st = nic.stats();
    assert_eq!(st.write_errors, 1);
    assert!(!nic.recording());
    assert!(st.frames < 60 && st.skipped > 0);
    nic.flush(); // no panic, no further errors
    assert_eq!(nic.stats().write_errors, 1);
}
