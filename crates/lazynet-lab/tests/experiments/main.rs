//! The lab's experiments end to end through the `lazynet-lab` binary: the
//! quick runs CI uses, and the Linux series' namespaces and helpers (root).

mod linux_series;
mod quick;
mod util;
