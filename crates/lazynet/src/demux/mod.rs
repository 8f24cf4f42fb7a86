//! Early demultiplexing (placeholder, being written).
