//! Network level framing: the meta file and prebuilder, and the four send
//! paths.

mod meta;
mod paths;
mod stream;
