//! What every experiment and benchmark shares: the core each role runs on
//! ([`cpus`]), the experiments' options, result files and judging
//! ([`exp`]), what a result file says about its run and `lazynet-lab
//! report` ([`report`]), the charts ([`plot`]), the programs an experiment
//! starts ([`procs`]), and the Linux system calls `std` lacks ([`sys`]).
//!
//! **Owns:** nothing an experiment measures. **May not touch:** the
//! experiments' own set-ups; `sys` is the only module of the lab with
//! `unsafe` code.

pub mod cpus;
pub mod exp;
pub mod plot;
pub mod procs;
pub mod report;
#[allow(unsafe_code)]
pub mod sys;
