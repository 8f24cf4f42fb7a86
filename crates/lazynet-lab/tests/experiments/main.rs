//! The lab's experiments end to end through the `lazynet-lab` binary: the
//! quick runs CI uses, the Linux series' namespaces and helpers (root), and
//! the committed result files.

mod linux_series;
mod quick;
mod results;
mod util;
