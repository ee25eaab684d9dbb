//! hubble-relay: `serve` runs Relay (see the library's docs).

use clap::Parser;
use hubble_relay::config::{Config, Flags};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "hubble-relay",
    about = "hubble-relay is a proxy server for the hubble API"
)]
struct Cli {
    /// Enable debug messages
    #[arg(short = 'D', long = "debug", global = true)]
    debug: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Run the gRPC proxy server
    Serve(Box<Flags>),
    /// Display detailed version information
    Version,
}

fn fatal(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("level=fatal msg={:?} subsys=hubble-relay", msg.to_string());
    ExitCode::FAILURE
}

async fn terminated() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let flags = match cli.command {
        Command::Version => {
            println!("{}", hubble_relay::observer::version());
            return ExitCode::SUCCESS;
        }
        Command::Serve(flags) => flags,
    };
    let config = match Config::load(&flags) {
        Ok(c) => c,
        Err(e) => return fatal(e),
    };
    agent::logging::init(cli.debug);
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fatal(format!("starting runtime: {e}")),
    };
    match rt.block_on(hubble_relay::server::run(config, terminated())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fatal(format!("{e:#}")),
    }
}
