//! The wire formats: checksum properties and a differential test against an
//! independent parser.

mod checksum;
mod differential;
