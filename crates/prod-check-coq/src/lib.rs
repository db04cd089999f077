//! ProD Coq checker (being written).
