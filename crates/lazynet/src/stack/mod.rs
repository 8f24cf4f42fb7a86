//! Stack (placeholder, being written).
