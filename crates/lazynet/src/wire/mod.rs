//! Wire formats (placeholder, being written).
