//! The XDP program that steers lazynet's frames to its AF_XDP socket, and
//! the few `bpf(2)` calls that load and attach it.
//!
//! **Owns:** an `XSKMAP` (queue → socket), the program (25 BPF
//! instructions, assembled here), and the `bpf_link` that attaches it to one
//! interface. Dropping a [`Steering`] closes the link, which detaches the
//! program: the kernel also does this when the process dies, however it
//! dies, so no program is ever left behind on an interface.
//!
//! **May not touch:** the socket's rings or frames ([`super::xdp`] does).
//!
//! **The program.** For every frame received on the interface: an IPv4
//! packet whose destination is lazynet's address, or an ARP packet whose
//! target is, is redirected to the socket bound to the receiving queue
//! (`bpf_redirect_map(&xsks, rx_queue_index, XDP_PASS)`: a queue without a
//! socket passes the frame on). Everything else — other addresses, IPv6,
//! the kernel's own traffic — goes to the kernel (`XDP_PASS`).
//!
//! **Why no crate and no compiler:** `aya` needs a BPF toolchain (`bpf-linker`)
//! to build programs, `libbpf-rs` needs `libelf` and `clang`, and neither is
//! on the machines we run on; the program is 25 instructions, so it is
//! assembled here from the instruction set's encoding (Linux
//! `Documentation/bpf/standardization/instruction-set.rst`) and loaded with
//! four system calls. The verifier checks it at load; a failure returns its
//! log.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`'s `BPF_XDP`.
const BPF_XDP: u32 = 37;
/// `XDP_FLAGS_SKB_MODE`: the generic hook (any device, after the socket
/// buffer is built); `XDP_FLAGS_DRV_MODE`: the driver's own hook.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// `XDP_PASS`.
const XDP_PASS: i32 = 2;
/// Helper `bpf_redirect_map`.
const HELPER_REDIRECT_MAP: i32 = 51;

/// One BPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Insn {
    code: u8,
    /// `dst_reg` in the low nibble, `src_reg` in the high one.
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0xf),
        off,
        imm,
    }
}

// Opcodes used (class | op | source / size).
const MOV64_X: u8 = 0xbf; // ALU64 | MOV | X
const MOV64_K: u8 = 0xb7; // ALU64 | MOV | K
const ADD64_K: u8 = 0x07; // ALU64 | ADD | K
const LDX_W: u8 = 0x61; // LDX | MEM | W
const LDX_H: u8 = 0x69; // LDX | MEM | H
const JGT_X: u8 = 0x2d; // JMP | JGT | X
const JEQ_K: u8 = 0x15; // JMP | JEQ | K
const JNE32_K: u8 = 0x56; // JMP32 | JNE | K (compares the low 32 bits)
const JA: u8 = 0x05; // JMP | JA
const LD_DW: u8 = 0x18; // LD | IMM | DW (two slots)
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;
/// `src_reg` of `LD_DW` that makes `imm` a map's file descriptor.
const PSEUDO_MAP_FD: u8 = 1;

/// Byte offsets in `struct xdp_md`.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE: i16 = 16;

/// The steering program for address `addr` and map `map_fd` (see the module
/// docs). Offsets in the frame: EtherType at 12, IPv4 destination at 30
/// (14 + 16), ARP target protocol address at 38 (14 + 24). The bytes read
/// are checked to be there first, as the verifier requires: 34 for IPv4
/// (a last fragment can be a 21-byte packet in a 35-byte frame: links
/// like veth do not pad to Ethernet's 60), 42 for ARP.
fn program(addr: Ipv4Addr, map_fd: RawFd) -> Vec<Insn> {
    // Frames are in network order; a 32-bit load on a little-endian CPU
    // gives these values.
    let ip = u32::from_le_bytes(addr.octets()) as i32;
    let (et_ipv4, et_arp) = (
        i32::from(u16::from_le_bytes([0x08, 0x00])),
        i32::from(u16::from_le_bytes([0x08, 0x06])),
    );
    vec![
        /* 0 */ insn(MOV64_X, 6, 1, 0, 0), // r6 = ctx
        /* 1 */ insn(LDX_W, 2, 1, MD_DATA, 0), // r2 = data
        /* 2 */ insn(LDX_W, 3, 1, MD_DATA_END, 0), // r3 = data_end
        /* 3 */ insn(MOV64_X, 4, 2, 0, 0), // r4 = data
        /* 4 */ insn(ADD64_K, 4, 0, 0, 34), // r4 += 34
        /* 5 */ insn(JGT_X, 4, 3, 17, 0), // if r4 > data_end: pass (23)
        /* 6 */ insn(LDX_H, 5, 2, 12, 0), // r5 = ethertype
        /* 7 */ insn(JEQ_K, 5, 0, 2, et_ipv4), // ipv4 (10)
        /* 8 */ insn(JEQ_K, 5, 0, 4, et_arp), // arp (13)
        /* 9 */ insn(JA, 0, 0, 13, 0), // pass (23)
        /* 10 ipv4 */ insn(LDX_W, 5, 2, 30, 0), // r5 = ip.dst
        /* 11 */ insn(JNE32_K, 5, 0, 11, ip), // not ours: pass (23)
        /* 12 */ insn(JA, 0, 0, 4, 0), // redirect (17)
        /* 13 arp */ insn(ADD64_K, 4, 0, 0, 8), // r4 = data + 42
        /* 14 */ insn(JGT_X, 4, 3, 8, 0), // if r4 > data_end: pass (23)
        /* 15 */ insn(LDX_W, 5, 2, 38, 0), // r5 = arp.tpa
        /* 16 */ insn(JNE32_K, 5, 0, 6, ip), // not ours: pass (23)
        /* 17 redirect */
        insn(LDX_W, 2, 6, MD_RX_QUEUE, 0), // r2 = rx_queue_index
        /* 18 */ insn(LD_DW, 1, PSEUDO_MAP_FD, 0, map_fd), // r1 = &xsks
        /* 19 */ insn(0, 0, 0, 0, 0), // (second half of the 64-bit load)
        /* 20 */ insn(MOV64_K, 3, 0, 0, XDP_PASS), // r3 = XDP_PASS
        /* 21 */ insn(CALL, 0, 0, 0, HELPER_REDIRECT_MAP),
        /* 22 */ insn(EXIT, 0, 0, 0, 0),
        /* 23 pass */ insn(MOV64_K, 0, 0, 0, XDP_PASS),
        /* 24 */ insn(EXIT, 0, 0, 0, 0),
    ]
}

/// `bpf(cmd, attr, size)`; the returned file descriptor, owned.
fn bpf_fd<T>(cmd: libc::c_long, attr: &mut T, what: &str) -> io::Result<OwnedFd> {
    let r = bpf(cmd, attr);
    if r < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("bpf({what}): {e}")));
    }
    // SAFETY: the command returned a new file descriptor that nobody else
    // owns.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> libc::c_long {
    // SAFETY: `attr` is a live, zero-padded `#[repr(C)]` prefix of `union
    // bpf_attr` for `cmd`; the kernel reads at most `size_of::<T>()` bytes
    // of it (and writes none for the commands used here). Pointers inside
    // it point to live memory of the caller for the duration of the call.
    unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    }
}

#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct MapUpdate {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreate {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// Where the program runs on the interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    /// The driver's own XDP hook (before any socket buffer exists).
    Driver,
    /// The generic hook, for devices without one.
    Generic,
}

impl Hook {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Hook::Driver => "driver",
            Hook::Generic => "generic",
        }
    }
}

/// The steering program attached to an interface, and its socket map.
/// Dropping it detaches the program.
#[derive(Debug)]
pub struct Steering {
    // Field order is drop order: the link first (detaches the program).
    _link: OwnedFd,
    _prog: OwnedFd,
    map: OwnedFd,
    hook: Hook,
}

/// Entries of the socket map: queues 0..MAP_QUEUES can be steered.
pub const MAP_QUEUES: u32 = 64;

impl Steering {
    /// Loads the program for `addr` and attaches it to interface `ifindex`:
    /// at the driver's hook if the device has one, else at the generic
    /// hook. Fails if another program holds the interface.
    pub fn attach(ifindex: u32, addr: Ipv4Addr) -> io::Result<Steering> {
        let mut name = [0u8; 16];
        name[..7].copy_from_slice(b"lazynet");
        let mut mc = MapCreate {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: MAP_QUEUES,
            map_name: name,
            ..MapCreate::default()
        };
        let map = bpf_fd(BPF_MAP_CREATE, &mut mc, "create XSKMAP")?;
        let prog = load(&program(addr, map.as_raw_fd()), name)?;
        let mut last = None;
        for (hook, flags) in [
            (Hook::Driver, XDP_FLAGS_DRV_MODE),
            (Hook::Generic, XDP_FLAGS_SKB_MODE),
        ] {
            let mut lc = LinkCreate {
                prog_fd: prog.as_raw_fd() as u32,
                target_ifindex: ifindex,
                attach_type: BPF_XDP,
                flags,
            };
            match bpf_fd(BPF_LINK_CREATE, &mut lc, "attach XDP program") {
                Ok(link) => {
                    return Ok(Steering {
                        _link: link,
                        _prog: prog,
                        map,
                        hook,
                    })
                }
                // Another program on the interface: no other hook helps.
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("{e} (another XDP program is attached to the interface)"),
                    ))
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("attach XDP program")))
    }

    /// Steers frames received on `queue` to the AF_XDP socket `xsk` (which
    /// must be bound to that queue).
    pub fn insert(&self, queue: u32, xsk: RawFd) -> io::Result<()> {
        if queue >= MAP_QUEUES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("queue {queue} beyond the socket map's {MAP_QUEUES}"),
            ));
        }
        let key = queue;
        let value = xsk as u32;
        let mut up = MapUpdate {
            map_fd: self.map.as_raw_fd() as u32,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            ..MapUpdate::default()
        };
        if bpf(BPF_MAP_UPDATE_ELEM, &mut up) < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("bpf(XSKMAP update): {e}")));
        }
        Ok(())
    }

    /// The hook the program runs at.
    pub fn hook(&self) -> Hook {
        self.hook
    }
}

/// Loads `insns` as an XDP program; on a verifier refusal, loads again with
/// the log on and returns it in the error.
fn load(insns: &[Insn], name: [u8; 16]) -> io::Result<OwnedFd> {
    let license = c"Dual MIT/GPL";
    let mut pl = ProgLoad {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name,
        expected_attach_type: BPF_XDP,
        ..ProgLoad::default()
    };
    match bpf_fd(BPF_PROG_LOAD, &mut pl, "load XDP program") {
        Ok(fd) => Ok(fd),
        Err(e)
            if e.raw_os_error() == Some(libc::EACCES) || e.raw_os_error() == Some(libc::EINVAL) =>
        {
            let mut log = vec![0u8; 16 * 1024];
            pl.log_level = 1;
            pl.log_size = log.len() as u32;
            pl.log_buf = log.as_mut_ptr() as u64;
            let _ = bpf(BPF_PROG_LOAD, &mut pl);
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            Err(io::Error::new(
                e.kind(),
                format!(
                    "{e}; verifier: {}",
                    String::from_utf8_lossy(&log[..end]).trim()
                ),
            ))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every jump lands on an instruction inside the program, and the
    /// program ends in `exit`: what the verifier checks first, tested
    /// without root.
    #[test]
    fn jumps_land_inside_the_program() {
        let p = program(Ipv4Addr::new(10, 201, 0, 2), 3);
        assert_eq!(p.last().map(|i| i.code), Some(EXIT));
        for (pc, i) in p.iter().enumerate() {
            if matches!(i.code, JGT_X | JEQ_K | JNE32_K | JA) {
                let to = pc as i64 + 1 + i64::from(i.off);
                assert!((0..p.len() as i64).contains(&to), "jump at {pc} to {to}");
                assert_ne!(to, 19, "jump into the middle of the 64-bit load");
            }
        }
        // The address compares as the frame's bytes load.
        let ip = u32::from_le_bytes([10, 201, 0, 2]) as i32;
        assert_eq!(p[11].imm, ip);
        assert_eq!(p[16].imm, ip);
    }
}
