//! The integration tests of `prod-cli`, one test binary (each file a module: linking
//! the workspace once per crate, not once per file).

mod cli_bench_hammer;
mod cli_bench_libraries;
mod cli_check_stream;
mod cli_dataset;
mod cli_experiment;
mod cli_help;
mod cli_isabelle;
mod cli_progress;
mod cli_queue;
mod cli_ranges;
mod cli_report;
mod cli_rl_frameworks;
mod cli_run_export;
mod cli_serve;
mod cli_serve_faults;
mod cli_train;
mod cli_transcripts;
mod cli_tree;
mod common;
mod device_dry_run;
mod lora_merge;
