//! ProD's Isabelle checker.
//!
//! * [`framing`] and [`client`] — the Isabelle system server protocol (system manual, chapter
//!   "The Isabelle server"): short and length-prefixed messages, the password handshake,
//!   synchronous `OK`/`ERROR`, asynchronous tasks whose `NOTE`/`FINISHED`/`FAILED` messages are
//!   demultiplexed by task id; blocking I/O with one reader thread per connection.
//! * [`server`] — `session_start` (with `dirs` for the AFP), `use_theories`, `purge_theories`,
//!   `session_stop`, `shutdown`, with typed results.
//! * [`rules`] — what untrusted text may contain (Isar tokens from `prod-isar`): one statement
//!   command; proof commands only, closing the goal exactly at the end; no `sorry`, `oops`,
//!   `\<proof>`, ML, `setup`, oracles, axiomatization or `quick_and_dirty` anywhere.
//! * [`theory`] — the temporary theory of one check (proposed lemmas admitted through a checker
//!   oracle with a fresh nonce, the renamed statement, the proof, the checker's audit of the
//!   goal's oracles and of new axioms) and the mapping of message positions (Isabelle symbols)
//!   back to steps.
//! * [`outcome`] — reading a `use_theories` result; [`checker`] — [`IsabelleChecker`], the
//!   [`prod_check::Checker`] for Isabelle, with the `sledgehammer` step (fixed method list,
//!   then Sledgehammer) and reconnection / session restart on infrastructure failures.
//! * [`final_check`] — the cold re-check of an assembled proof in a fresh session.
//! * [`config`] — [`IsabelleCheckConfig`] (`[check.isabelle]` in `prod.toml`).

pub mod checker;
pub mod client;
pub mod config;
pub mod final_check;
pub mod framing;
pub mod outcome;
pub mod rules;
pub mod server;
pub mod theory;

#[cfg(feature = "test-server")]
pub mod testing;

pub use checker::{plan, plan_with, IsabelleChecker, Plan};
pub use client::{parse_server_banner, ClientError, Connection, TaskOutcome};
pub use config::{HammerConfig, IsabelleCheckConfig};
pub use final_check::{assembled_theory_text, final_check, final_check_assembled, FinalTheory};
pub use rules::Rules;
