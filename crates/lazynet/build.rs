//! Code layout variants of the TCP/IP paths (the paths study,
//! `lazynet-lab paths`, docs/PERFORMANCE.md §5).
//!
//! `LAZYNET_LAYOUT` chooses which layout hints the source's
//! `cfg_attr(lazynet_outline, ...)` and `cfg_attr(lazynet_pin, ...)`
//! attributes turn on; unset, the default build's:
//!
//! - `std`: no hints at all (the compiler's own inlining and block order);
//! - `out`: rare code (handshake, RTO, SACK recovery, probes and
//!   keep-alive, resets, listener and TIME-WAIT replies, error returns)
//!   outlined into `#[cold] #[inline(never)]` functions;
//! - `pin`: `out` plus the established connection's input and output paths
//!   inlined into their entry points (`#[inline(always)]`), library
//!   functions (checksum, copy, rings, hash) left out of line.
//!
//! Function order (the paper's cloning and its adversarial layout) is a
//! link-time choice, not a source one: the lab links with a symbol-ordering
//! file (`lazynet-lab paths`).

/// The variant a plain build gets (measured: docs/PERFORMANCE.md §5).
const DEFAULT: &str = "out";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(lazynet_outline)");
    println!("cargo::rustc-check-cfg=cfg(lazynet_pin)");
    println!("cargo::rerun-if-env-changed=LAZYNET_LAYOUT");
    println!("cargo::rerun-if-changed=build.rs");
    let layout = std::env::var("LAZYNET_LAYOUT").unwrap_or_else(|_| DEFAULT.to_string());
    let (outline, pin) = match layout.as_str() {
        "std" => (false, false),
        "out" => (true, false),
        "pin" => (true, true),
        other => panic!("LAZYNET_LAYOUT={other}: expected std, out or pin"),
    };
    if outline {
        println!("cargo::rustc-cfg=lazynet_outline");
    }
    if pin {
        println!("cargo::rustc-cfg=lazynet_pin");
    }
}
