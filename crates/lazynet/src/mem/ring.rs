//! SPSC rings (filled in by the mem work).
