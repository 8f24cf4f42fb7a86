//! # lazynet-tokio
//!
//! Async sockets on a lazynet [`Stack`] for tokio's current-thread runtime:
//! [`TcpListener::accept`]`.await`, a [`TcpStream`] that implements
//! tokio's `AsyncRead`/`AsyncWrite` (and `futures-io`'s with the feature of
//! that name), [`UdpSocket::send_to`]/[`UdpSocket::recv_from`]`.await`. What
//! runs on tokio's sockets — hyper through `hyper-util`'s `TokioIo`, a
//! codec, a hand-written protocol — runs on these.
//!
//! ```no_run
//! # async fn f() -> std::io::Result<()> {
//! use lazynet::nic::wirepair::{WireConfig, WirePair};
//! use lazynet::stack::{Stack, StackConfig};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! let (a, _b) = WirePair::new(WireConfig::default())?;
//! let stack = Stack::new(a, StackConfig::default());
//! let (net, driver) = lazynet_tokio::new(stack)?;
//! tokio::task::spawn_local(async move { driver.run().await });
//! let l = lazynet_tokio::TcpListener::bind(&net, "0.0.0.0:7".parse().unwrap())?;
//! let (mut s, _peer) = l.accept().await?;
//! let mut buf = [0u8; 64];
//! let n = s.read(&mut buf).await?;
//! s.write_all(&buf[..n]).await?;
//! # Ok(()) }
//! ```
//!
//! **Owns:** the stack, shared by the tasks of one thread ([`Net`]); a
//! waker slot per socket (its readiness registration's token); the
//! [`Driver`]: the task that receives, runs due TCP work and timers, takes
//! the ready set ([`Stack::ready`]) and wakes the tasks it names, then
//! sleeps on the stack's descriptor ([`Stack::wait_fd`] in tokio's
//! reactor, `AsyncFd`) until frames arrive or the next timer
//! ([`Stack::next_deadline`]) is due.
//!
//! **May not touch:** protocol state (every operation is a socket call;
//! protocol work of a read still runs in the reading task, as LRP wants),
//! and other threads: one stack, one thread, one runtime — nothing here is
//! `Send`, by design (the stack is a per-core object).
//!
//! Why a crate of our own and not an adapter: tokio's sockets are OS
//! descriptors; lazynet's are handles into a stack the caller owns, woken
//! by readiness events, not by the reactor. The reactor is used for the
//! one descriptor that is a descriptor: the stack's wake-up.
//!
//! Bounds: one driver turn receives one NIC batch, does at most
//! [`DriverConfig::service_budget`] TCP work units and takes at most
//! [`DriverConfig::events_per_turn`] ready sockets, then yields to the
//! tasks it woke.

#![deny(unsafe_code)]

mod core;
#[allow(unsafe_code)]
mod sys;
mod tcp;
mod udp;

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use lazynet::nic::Nic;
use lazynet::stack::ready::Sleep;
use lazynet::stack::Stack;
use tokio::io::unix::AsyncFd;

pub use crate::tcp::{TcpListener, TcpStream};
pub use crate::udp::UdpSocket;

use crate::core::{Core, Inner};

/// How the [`Driver`] runs.
#[derive(Clone, Copy, Debug)]
pub struct DriverConfig {
    /// Keep turning for this long after the last work before sleeping on
    /// the stack's descriptor (ns; 0: sleep at once; `None`: as long as
    /// the NIC's own wait would, [`Nic::idle_spin_ns`]: the cost of a
    /// wake-up on the in-memory wire, nothing on TAP or AF_XDP). Spinning
    /// trades CPU for the wake-up's latency, as a busy-polling socket
    /// option does.
    pub spin_ns: Option<u64>,
    /// TCP work units ([`Stack::tcp_service`]) per turn.
    pub service_budget: usize,
    /// Ready sockets taken per turn (the rest wait for the next).
    pub events_per_turn: usize,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            spin_ns: None,
            service_budget: 1024,
            events_per_turn: 1024,
        }
    }
}

/// The stack's sockets, for the tasks of this thread (cheap to clone).
#[derive(Clone)]
pub struct Net {
    core: Rc<RefCell<dyn Core>>,
}

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Net").finish_non_exhaustive()
    }
}

/// The task that drives the stack (see the crate docs): spawn
/// [`Driver::run`] on the same thread's runtime (`spawn_local`) before
/// awaiting any socket.
pub struct Driver<N: Nic> {
    inner: Rc<RefCell<Inner<N>>>,
    fd: AsyncFd<OwnedFd>,
    cfg: DriverConfig,
    spin_ns: u64,
}

impl<N: Nic> std::fmt::Debug for Driver<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

/// The stack's sockets and the driver that runs it, with the default
/// [`DriverConfig`]. Fails where the stack's NIC has no descriptor to
/// sleep on ([`Stack::wait_fd`]: a wire end attached from another
/// process, an attached stack) or outside a tokio runtime.
pub fn new<N: Nic + 'static>(stack: Stack<N>) -> io::Result<(Net, Driver<N>)> {
    with_config(stack, DriverConfig::default())
}

/// [`new`] with `cfg`.
pub fn with_config<N: Nic + 'static>(
    stack: Stack<N>,
    cfg: DriverConfig,
) -> io::Result<(Net, Driver<N>)> {
    let fd = stack
        .wait_fd()
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "the stack's NIC has no descriptor to sleep on in a reactor",
            )
        })?
        .try_clone_to_owned()?;
    let fd = sys::register(fd)?;
    let spin_ns = cfg.spin_ns.unwrap_or_else(|| stack.nic().idle_spin_ns());
    let inner = Rc::new(RefCell::new(Inner::new(stack, cfg.events_per_turn)));
    let core: Rc<RefCell<dyn Core>> = inner.clone();
    Ok((
        Net { core },
        Driver {
            inner,
            fd,
            cfg,
            spin_ns,
        },
    ))
}

impl<N: Nic> Driver<N> {
    /// Runs the stack for as long as the task lives (it never returns
    /// `Ok`; an error of the reactor ends it).
    pub async fn run(&self) -> io::Result<()> {
        let mut idle_since: Option<u64> = None;
        loop {
            let (worked, now) = self.inner.borrow_mut().turn(self.cfg.service_budget);
            if worked {
                idle_since = None;
                YieldNow(false).await;
                continue;
            }
            let since = *idle_since.get_or_insert(now);
            if now.saturating_sub(since) < self.spin_ns {
                YieldNow(false).await;
                continue;
            }
            let sleep = self.inner.borrow_mut().sleep_begin();
            let deadline = match sleep {
                Sleep::Busy => {
                    self.inner.borrow_mut().sleep_end();
                    YieldNow(false).await;
                    continue;
                }
                Sleep::Until(d) => d,
            };
            let kick = self.inner.borrow().kick.clone();
            let timer = async {
                match deadline {
                    Some(d) => {
                        let wait = d.saturating_sub(self.inner.borrow().stack.now());
                        tokio::time::sleep(Duration::from_nanos(wait)).await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let r = tokio::select! {
                r = self.fd.readable() => r.map(|mut g| g.clear_ready()),
                _ = timer => Ok(()),
                _ = kick.notified() => Ok(()),
            };
            self.inner.borrow_mut().sleep_end();
            idle_since = None;
            r?;
        }
    }

    /// Runs `f` on the stack (counters, configuration); not while a
    /// socket call is in progress (never: everything is on one thread).
    pub fn with_stack<R>(&self, f: impl FnOnce(&mut Stack<N>) -> R) -> R {
        f(&mut self.inner.borrow_mut().stack)
    }
}

/// Returns `Pending` once after waking itself: lets the tasks a turn woke
/// run before the next turn, without a round through the reactor
/// (tokio's own `yield_now` defers to after the next reactor poll, a
/// system call per turn).
struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
