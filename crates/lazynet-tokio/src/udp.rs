//! UDP: [`UdpSocket`] over [`crate::Net`].

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;

use crate::core::Sock;
use crate::Net;

/// A UDP socket.
#[derive(Debug)]
pub struct UdpSocket {
    net: Net,
    s: Sock,
}

impl UdpSocket {
    /// Binds to `addr` (`0.0.0.0` for the stack's address, port 0 for an
    /// ephemeral port).
    pub fn bind(net: &Net, addr: SocketAddr) -> io::Result<UdpSocket> {
        let s = net.core.borrow_mut().udp_bind(crate::tcp::v4(addr)?)?;
        Ok(UdpSocket {
            net: net.clone(),
            s,
        })
    }

    /// Sends `data` to `dst` as one datagram; waits only for a transmit
    /// buffer.
    pub async fn send_to(&self, data: &[u8], dst: SocketAddr) -> io::Result<usize> {
        let dst = crate::tcp::v4(dst)?;
        poll_fn(|cx| {
            self.net
                .core
                .borrow_mut()
                .poll_send_to(self.s, cx, data, dst)
        })
        .await
    }

    /// The next datagram, into `buf` (truncated to its length), and its
    /// source.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let (n, from) =
            poll_fn(|cx| self.net.core.borrow_mut().poll_recv_from(self.s, cx, buf)).await?;
        Ok((n, from.into()))
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.net.core.borrow().addrs(self.s)?.0.into())
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        if let Ok(mut c) = self.net.core.try_borrow_mut() {
            c.close(self.s, false);
        }
    }
}
