//! The integration tests of `prod-run`, one test binary (each file a module: linking
//! the workspace once per crate, not once per file).

mod canary;
mod ceiling;
mod common;
mod eval_remote;
mod eval_resume;
mod experiment;
mod hammer_baseline;
mod hammer_leaves;
mod hf_load;
mod isabelle_run;
mod native;
mod python_trainer;
mod rl_resume;
