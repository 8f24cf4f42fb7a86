//! The LRP paper's experiments (Druschel and Banga, "Lazy Receiver
//! Processing", 1996): `livelock` (Fig. 3; its kernel traffic over TAP in
//! [`tap`]), `latency-under-load` (Fig. 4), `fairness` (Table 2),
//! `syn-flood` (Fig. 5), and `bench lrp-share` (the multi-process
//! placement's CPU shares, [`share`]); what `fairness` and `syn-flood`
//! share around the host runtime is in [`hostloop`].
//!
//! **May not touch:** the stack's internals (public API only). The Linux
//! series are [`crate::baseline::linux`]'s.

pub mod fairness;
mod hostloop;
pub mod latency;
pub mod livelock;
pub mod share;
pub mod synflood;
pub mod tap;
