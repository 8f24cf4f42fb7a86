//! The one OS boundary of this crate: putting the stack's wake-up
//! descriptor into tokio's reactor.

use std::io;
use std::os::fd::OwnedFd;

use tokio::io::unix::AsyncFd;

/// Registers `fd` (a duplicate of [`lazynet::stack::Stack::wait_fd`]) for
/// readability.
pub(crate) fn register(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: `register` needs the descriptor to stay open and unchanged
    // while registered: `AsyncFd` owns this `OwnedFd` (it is closed only
    // after deregistration, when the `AsyncFd` drops) and nothing else
    // holds or closes it.
    unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
        .map_err(|e| e.into_parts().1)
}
