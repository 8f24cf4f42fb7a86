//! Loom models (built with `--cfg loom`): the ring's memory orderings and the
//! ni-lrp channel notification.

mod notify;
mod ring;
