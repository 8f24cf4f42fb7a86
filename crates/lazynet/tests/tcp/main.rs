//! TCP's sans-IO core, segment by segment and grouped by RFC state, plus
//! property, differential and simulated-network tests.

mod buffer;
mod close;
mod cubic;
mod data;
mod fastpath;
mod listen;
mod listen_cookie;
mod listen_diff;
mod listen_ref;
mod loss;
mod prop;
mod rst;
mod sack;
mod setup;
mod sim;
mod timewait;
mod tx_sum;
mod util;
