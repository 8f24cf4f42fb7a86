//! The free list of a driver's buffers.
//!
//! **Owns:** which buffer indices a NIC holds free. **May not touch:** the
//! buffers themselves.

/// Free list of buffer indices: allocated once, double-release safe.
#[derive(Debug)]
pub(crate) struct FreeList {
    stack: Vec<u32>,
    /// Bit set = the NIC owns the buffer (it is on `stack`).
    owned: Vec<u64>,
}

impl FreeList {
    pub(crate) fn full(count: u32) -> Self {
        let mut stack: Vec<u32> = (0..count).rev().collect();
        stack.shrink_to_fit();
        let words = (count as usize).div_ceil(64);
        let mut owned = vec![u64::MAX; words];
        let rem = count as usize % 64;
        if rem != 0 {
            if let Some(last) = owned.last_mut() {
                *last = (1u64 << rem) - 1;
            }
        }
        FreeList { stack, owned }
    }

    #[inline]
    pub(crate) fn pop(&mut self) -> Option<u32> {
        let b = self.stack.pop()?;
        if let Some(w) = self.owned.get_mut(b as usize / 64) {
            *w &= !(1u64 << (b % 64));
        }
        Some(b)
    }

    /// Returns false (and does nothing) for an unknown or already free buffer.
    #[inline]
    pub(crate) fn push(&mut self, b: u32) -> bool {
        let Some(w) = self.owned.get_mut(b as usize / 64) else {
            return false;
        };
        let bit = 1u64 << (b % 64);
        if *w & bit != 0 || self.stack.len() == self.stack.capacity() {
            return false;
        }
        *w |= bit;
        self.stack.push(b);
        true
    }

    pub(crate) fn len(&self) -> usize {
        self.stack.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_list_rejects_double_release() {
        let mut f = FreeList::full(70);
        assert_eq!(f.len(), 70);
        let a = f.pop().unwrap();
        assert!(!f.push(5)); // already free
        assert!(f.push(a));
        assert!(!f.push(a));
        assert!(!f.push(70));
        assert!(!f.push(u32::MAX));
        assert_eq!(f.len(), 70);
    }
}
