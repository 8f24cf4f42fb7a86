//! Sockets (placeholder, being written).
