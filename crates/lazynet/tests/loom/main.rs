//! Loom models (built with `--cfg loom`): the ring's memory orderings and the
//! ni-lrp channel notification, and the doorbell.

mod doorbell;
mod notify;
mod ring;
