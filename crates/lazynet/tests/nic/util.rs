//! Test helpers shared by integration tests.

use std::collections::VecDeque;

use lazynet::mem::{BufArea, Desc};
use lazynet::nic::Nic;

/// A tiny in-test NIC: `inject` queues received frames; `send` records the
/// bytes and frees the buffer (accepting at most `tx_cap` frames per call).
pub struct Mock {
    pub bufs: BufArea,
    pub free: Vec<u32>,
    pub rx: VecDeque<Desc>,
    pub sent: Vec<Vec<u8>>,
    pub tx_cap: usize,
    pub count: u32,
}

impl Mock {
    pub fn new(count: u32) -> Self {
        Mock {
            bufs: BufArea::private("mock", 2048, count).unwrap(),
            free: (0..count).rev().collect(),
            rx: VecDeque::new(),
            sent: Vec::new(),
            tx_cap: usize::MAX,
            count,
        }
    }
    pub fn inject(&mut self, bytes: &[u8]) {
        let b = self.free.pop().expect("mock out of buffers");
        self.bufs.buf_mut(b).unwrap()[..bytes.len()].copy_from_slice(bytes);
        self.rx.push_back(Desc::new(b, bytes.len() as u16));
    }
}

impl Nic for Mock {
    fn mac(&self) -> [u8; 6] {
        [2, 0, 0, 0, 0, 1]
    }
    fn mtu(&self) -> usize {
        200
    }
    fn buffers(&self) -> &BufArea {
        &self.bufs
    }
    fn buffers_mut(&mut self) -> &mut BufArea {
        &mut self.bufs
    }
    fn recv(&mut self, out: &mut [Desc]) -> usize {
        let mut n = 0;
        while n < out.len() {
            match self.rx.pop_front() {
                Some(d) => out[n] = d,
                None => break,
            }
            n += 1;
        }
        n
    }
    fn alloc(&mut self, out: &mut [u32]) -> usize {
        let mut n = 0;
        while n < out.len() {
            match self.free.pop() {
                Some(b) => out[n] = b,
                None => break,
            }
            n += 1;
        }
        n
    }
    fn send(&mut self, frames: &[Desc]) -> usize {
        let n = frames.len().min(self.tx_cap);
        for d in &frames[..n] {
            if let Some(f) = self.bufs.frame(*d) {
                self.sent.push(f.to_vec());
            }
            if d.buf < self.count && !self.free.contains(&d.buf) {
                self.free.push(d.buf);
            }
        }
        n
    }
    fn release(&mut self, bufs: &[Desc]) {
        for d in bufs {
            if d.buf < self.count && !self.free.contains(&d.buf) {
                self.free.push(d.buf);
            }
        }
    }
}

/// Removes the peer namespace on drop, even if the test fails.
pub struct Down(pub lazynet::nic::netns::PeerNs);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = self.0.down();
    }
}
