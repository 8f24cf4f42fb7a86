//! The pieces of the `lazynet` program, as a library so that the lab
//! (`lazynet-lab`) measures the very servers users run.
//!
//! **Owns:** the programs' command-line arguments ([`args`]), opening a NIC
//! for them ([`serve`]), the UDP echo server and client ([`echo`]), the TCP
//! servers and the downloader ([`tcp_cmd`]), the HTTP/1.1 server and client
//! state machines ([`http`]), the media server ([`media`]) and the NLF
//! prebuilder's front end ([`nlf_cmd`]).
//!
//! **May not touch:** protocol state: everything goes through the `lazynet`
//! library's sockets and stack. No experiment, comparison or plotting code
//! lives here.
#![deny(unsafe_code)]

pub mod args;
pub mod daemon_cmd;
pub mod echo;
pub mod http;
pub mod media;
pub mod memnet_http;
pub mod nlf_cmd;
pub mod serve;
pub mod tcp_cmd;
pub mod util;
