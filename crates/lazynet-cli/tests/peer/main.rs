//! The `lazynet` program against real peers: the Linux kernel in a network
//! namespace over TAP (root; under `CI=true` these never skip), real clients
//! and players (ping, curl, Python, ffmpeg), and a second lazynet process on
//! the in-memory wire. Every namespace and device gets a unique name and is
//! removed by a guard even when a test fails.

mod daemon;
mod media;
mod tcp;
mod udp;
mod util;
mod xdp;
