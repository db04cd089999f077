//! The fake server lives in the crate (feature `test-server`), shared with the run pipeline's tests.
#![allow(unused_imports)]
pub use prod_check_isabelle::testing::*;
