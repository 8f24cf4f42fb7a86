//! The communication area: the ring against a model, and regions, rings and the
//! wire shared by two processes.

mod ring_prop;
mod xproc;
