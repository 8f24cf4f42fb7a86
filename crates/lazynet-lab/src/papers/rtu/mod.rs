//! The RTU paper's experiments, all in `rtu-qos`: guaranteed TCP streams
//! on periodic handlers and admission (Fig. 7, [`qos`], which runs the
//! others), a reactive echo beside best-effort bulk streams (Fig. 8,
//! [`echo`]), and the paper's mix of TCP and UDP streams beside a reactive
//! echo (Table II and Fig. 9, [`mix`]); lazynet beside Linux TCP, whose
//! series are here too (they share the streams' pacing and accounting).
//!
//! **May not touch:** the stack's internals (public API only).

pub mod echo;
pub mod mix;
pub mod qos;
