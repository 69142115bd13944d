//! # strand-client: the Strand Rust SDK (under construction)
