//! Read-only mappings of files (media and their NLF meta-data), so large
//! files are paged in on demand rather than read into memory.
//!
//! **Owns:** the read-only mapping and its length. **May not touch:** the
//! file's contents (never written) or its meaning.

use std::fs::File;
use std::io;
use std::path::Path;

use memmap2::Mmap;

/// A file mapped read-only. An empty file maps to an empty slice.
#[derive(Debug)]
pub struct MappedFile {
    map: Option<Mmap>,
}

impl MappedFile {
    /// Maps `path` read-only.
    pub fn open(path: &Path) -> io::Result<MappedFile> {
        let f = File::open(path)?;
        if f.metadata()?.len() == 0 {
            return Ok(MappedFile { map: None });
        }
        // SAFETY: the mapping is read-only and private to this process. A
        // file truncated or rewritten by another process while mapped could
        // change or SIGBUS the bytes we read; media and meta files are ours
        // and are validated (length, fingerprint, CRC) after mapping, and
        // every index into the mapping is bounds-checked by slice indexing.
        let map = unsafe { Mmap::map(&f)? };
        Ok(MappedFile { map: Some(map) })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

impl AsRef<[u8]> for MappedFile {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}
