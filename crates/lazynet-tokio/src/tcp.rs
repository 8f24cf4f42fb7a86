//! TCP: [`TcpListener`] and [`TcpStream`] over [`crate::Net`].

use std::future::poll_fn;
use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::core::Sock;
use crate::Net;

/// The accept queue's default length ([`TcpListener::bind`]).
const BACKLOG: usize = 1024;
/// Most bytes one read offers the stack: `ReadBuf`'s unfilled part is
/// zeroed before the stack writes to it, and a read takes what is there.
const READ_CHUNK: usize = 64 * 1024;

pub(crate) fn v4(addr: SocketAddr) -> io::Result<SocketAddrV4> {
    match addr {
        SocketAddr::V4(a) => Ok(a),
        SocketAddr::V6(_) => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "lazynet speaks IPv4",
        )),
    }
}

/// A listening TCP socket.
#[derive(Debug)]
pub struct TcpListener {
    net: Net,
    s: Sock,
}

impl TcpListener {
    /// Listens on `addr` (`0.0.0.0` for the stack's address; not port 0).
    pub fn bind(net: &Net, addr: SocketAddr) -> io::Result<TcpListener> {
        Self::bind_with_backlog(net, addr, BACKLOG)
    }

    /// [`TcpListener::bind`] with an accept queue of `backlog`.
    pub fn bind_with_backlog(
        net: &Net,
        addr: SocketAddr,
        backlog: usize,
    ) -> io::Result<TcpListener> {
        let s = net.core.borrow_mut().tcp_listen(v4(addr)?, backlog)?;
        Ok(TcpListener {
            net: net.clone(),
            s,
        })
    }

    /// The next connection and its peer's address.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let s = poll_fn(|cx| self.net.core.borrow_mut().poll_accept(self.s, cx)).await?;
        let stream = TcpStream {
            net: self.net.clone(),
            s,
        };
        let peer = stream.peer_addr()?;
        Ok((stream, peer))
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.net.core.borrow().addrs(self.s)?.0.into())
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        // Connections not yet accepted are reset (RFC 9293 §3.10.5).
        if let Ok(mut c) = self.net.core.try_borrow_mut() {
            c.close(self.s, false);
        }
    }
}

/// A TCP connection: tokio's `AsyncRead` and `AsyncWrite` (and
/// `futures-io`'s with that feature). Dropping it closes it gracefully
/// (its FIN follows the data still queued; unread data makes it a reset,
/// RFC 1122 §4.2.2.13); the stack finishes the close as an orphan.
#[derive(Debug)]
pub struct TcpStream {
    net: Net,
    s: Sock,
}

impl TcpStream {
    /// Connects to `addr`; resolves once established (or refused, reset,
    /// timed out by the stack's SYN retransmissions).
    pub async fn connect(net: &Net, addr: SocketAddr) -> io::Result<TcpStream> {
        let s = net.core.borrow_mut().tcp_connect(v4(addr)?)?;
        let stream = TcpStream {
            net: net.clone(),
            s,
        };
        poll_fn(|cx| stream.net.core.borrow_mut().poll_connected(stream.s, cx)).await?;
        Ok(stream)
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.net.core.borrow().addrs(self.s)?.0.into())
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        let (_, p) = self.net.core.borrow().addrs(self.s)?;
        p.map(Into::into)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))
    }

    /// `TCP_NODELAY`: send small segments at once instead of waiting for
    /// the peer's ACK (Nagle, RFC 896).
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.net.core.borrow_mut().set_nodelay(self.s, on)
    }

    /// Resets the connection instead of closing it gracefully.
    pub fn abort(self) {
        if let Ok(mut c) = self.net.core.try_borrow_mut() {
            c.close(self.s, true);
        }
        std::mem::forget(self);
    }

    fn read_into(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let want = buf.remaining().min(READ_CHUNK);
        let dst = buf.initialize_unfilled_to(want);
        match self.net.core.borrow_mut().poll_read(self.s, cx, dst) {
            Poll::Ready(Ok(n)) => {
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        if let Ok(mut c) = self.net.core.try_borrow_mut() {
            c.close(self.s, false);
        }
    }
}

impl AsyncRead for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        self.read_into(cx, buf)
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        self.net.core.borrow_mut().poll_write(self.s, cx, data)
    }

    /// The bytes are the stack's once written: nothing to flush.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Sends the FIN after the data queued (the read side stays open).
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.net.core.borrow_mut().shutdown(self.s))
    }
}

#[cfg(feature = "futures-io")]
impl futures_io::AsyncRead for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        self.net.core.borrow_mut().poll_read(self.s, cx, buf)
    }
}

#[cfg(feature = "futures-io")]
impl futures_io::AsyncWrite for TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        AsyncWrite::poll_write(self, cx, data)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        AsyncWrite::poll_flush(self, cx)
    }
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        AsyncWrite::poll_shutdown(self, cx)
    }
}
