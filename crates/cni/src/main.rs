//! cilium-cni: called by the container runtime with CNI_* variables and the
//! network configuration on stdin; prints a result or a CNI error on stdout.

mod cmd;
mod env;
mod error;
mod netconf;
mod result;

use error::{CniError, INVALID_ENV};
use std::io::Read;
use std::process::ExitCode;

/// Newest CNI specification version this plugin speaks.
pub const LATEST_VERSION: &str = "1.1.0";

/// The answer on stdout; a runtime that went away before reading it gets
/// none (and no panic).
fn print_json(v: &serde_json::Value) {
    use std::io::Write;
    let text = serde_json::to_string(v).expect("JSON value serializes");
    let _ = writeln!(std::io::stdout(), "{text}");
}

fn run() -> Result<Option<serde_json::Value>, (CniError, String)> {
    let env = env::Env::from_process().map_err(|e| (e, LATEST_VERSION.to_owned()))?;
    if env.command == "VERSION" {
        return Ok(Some(serde_json::json!({
            "cniVersion": LATEST_VERSION,
            "supportedVersions": netconf::SUPPORTED_VERSIONS,
        })));
    }
    let known = ["ADD", "DEL", "CHECK", "STATUS", "GC"];
    if !known.contains(&env.command.as_str()) {
        return Err((
            CniError::new(
                INVALID_ENV,
                format!("unknown CNI_COMMAND {:?}", env.command),
            )
            .details("expected one of ADD, DEL, CHECK, VERSION, STATUS, GC"),
            LATEST_VERSION.to_owned(),
        ));
    }
    let mut stdin = Vec::new();
    std::io::stdin().read_to_end(&mut stdin).map_err(|e| {
        (
            CniError::new(error::IO_FAILURE, format!("reading stdin: {e}")),
            LATEST_VERSION.to_owned(),
        )
    })?;
    let conf = netconf::parse(&stdin).map_err(|e| (e, LATEST_VERSION.to_owned()))?;
    let version = conf.cni_version.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| {
            (
                CniError::new(error::IO_FAILURE, e.to_string()),
                version.clone(),
            )
        })?;
    let out = rt.block_on(async {
        match env.command.as_str() {
            "ADD" => cmd::add(&env, &conf).await.map(Some),
            "DEL" => cmd::del(&env, &conf).await.map(|()| None),
            "CHECK" => cmd::check(&env, &conf).await.map(|()| None),
            "STATUS" => cmd::status().map(|()| None),
            _ => cmd::gc(&conf).map(|()| None),
        }
    });
    out.map_err(|e| (e, version))
}

fn main() -> ExitCode {
    match run() {
        Ok(Some(v)) => {
            print_json(&v);
            ExitCode::SUCCESS
        }
        Ok(None) => ExitCode::SUCCESS,
        Err((mut e, version)) => {
            e.cni_version = version;
            print_json(&serde_json::to_value(&e).expect("error serializes"));
            ExitCode::FAILURE
        }
    }
}
