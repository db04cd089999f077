//! `prod serve`: the flags of the checker's HTTP service, handed to prod-serve (the service
//! itself: routes, bounds, metrics, canaries).

use std::net::SocketAddr;

use clap::Args;
use prod_serve::ServeSettings;

use crate::{exit, ranges};
use prod_prover::CheckerSettings;

/// Serve the checker over HTTP (reward endpoint for RL trainers): /v1/check, /v1/tree, /v1/assemble.
///
/// Routes: POST /v1/check, POST /v1/tree, POST /v1/assemble, GET /health, GET /metrics.
///
/// `POST /v1/check` takes {"nodes": [NODE, …]} where NODE is a line of `prod check`'s input
/// and answers {"results": [VERDICT, …]} in the same order (`prod check --json`'s lines, with
/// the node's own extra fields); with `Accept: application/x-ndjson` or `?stream=1` one line
/// per node as it finishes, with its "index". `POST /v1/tree` adds "globally_correct" (the
/// tree solver); `POST /v1/assemble` {"nodes": […], "root": INDEX} adds the root's complete
/// proof and its cold re-check ("proved"). Only loopback addresses without an API key.
/// Details: docs/serve.md.
///
/// Example: prod serve --workers 4 --cache verdicts.sqlite
/// Example: PROD_API_KEY=secret prod serve --addr 0.0.0.0:8537
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct ServeArgs {
    /// Address to listen on (port 0: any free port; the bound address is printed on stderr).
    #[arg(long, default_value = prod_serve::DEFAULT_ADDR)]
    pub addr: SocketAddr,
    /// Require `Authorization: Bearer KEY` (all routes but /health). Needed for an address
    /// that is not loopback.
    #[arg(long, env = "PROD_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Largest request body, MiB.
    #[arg(long, default_value_t = prod_serve::DEFAULT_MAX_BODY_MB, value_parser = ranges::positive_usize)]
    pub max_body_mb: usize,
    /// Most nodes in one request.
    #[arg(long, default_value_t = prod_serve::DEFAULT_MAX_NODES, value_parser = ranges::positive_usize)]
    pub max_nodes: usize,
    /// Most nodes admitted and not yet judged, over all requests; beyond it: 429.
    #[arg(long, default_value_t = prod_serve::DEFAULT_MAX_QUEUED, value_parser = ranges::positive_usize)]
    pub max_queued: usize,
    /// Keep no verdicts. Without --cache (or `[check] cache`) the service keeps the newest
    /// 100,000 verdicts in memory and answers a node it checked before from them (an RL
    /// trainer samples the same completion many times); infra verdicts are never kept.
    #[arg(long, conflicts_with = "cache")]
    pub no_cache: bool,
    #[command(flatten)]
    pub checker: CheckerSettings,
}

impl ServeArgs {
    /// The flags as the service's settings.
    pub fn settings(&self) -> ServeSettings {
        ServeSettings {
            addr: self.addr,
            api_key: self.api_key.clone(),
            max_body_mb: self.max_body_mb,
            max_nodes: self.max_nodes,
            max_queued: self.max_queued,
            no_cache: self.no_cache,
            checker: self.checker.clone(),
        }
    }
}

pub fn run(a: ServeArgs) -> exit::Result {
    Ok(prod_serve::run(a.settings())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    #[test]
    fn the_defaults_are_the_services() {
        let a = Cli::try_parse_from(["t"]).unwrap().serve.settings();
        let d = ServeSettings::default();
        assert_eq!(
            (a.addr, a.max_body_mb, a.max_nodes, a.max_queued, a.no_cache),
            (d.addr, d.max_body_mb, d.max_nodes, d.max_queued, d.no_cache)
        );
        assert!(Cli::try_parse_from(["t", "--no-cache", "--cache", "v.sqlite"]).is_err());
    }
}
