//! Protocols (placeholder, being written).
