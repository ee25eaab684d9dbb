//! The goals each figure is judged by (issue 34's table), and the verdicts
//! a run collects so it can close with one table of every row.

use std::sync::Mutex;

/// A ratio to its same-run baseline that must be at least the goal.
pub(crate) const SAME_NODE_THROUGHPUT: f64 = 0.98;
pub(crate) const TUNNEL_THROUGHPUT: f64 = 1.0;
pub(crate) const NATIVE_THROUGHPUT: f64 = 0.98;
pub(crate) const CLUSTER_IP_THROUGHPUT: f64 = 1.0;
pub(crate) const CLUSTER_IP_CONN_RATE: f64 = 1.0;
pub(crate) const MASQ_CONN_RATE: f64 = 1.5;
pub(crate) const MASQ_THROUGHPUT: f64 = 1.1;
/// Pod-to-pod throughput over IPv6 against IPv4 on the same dual-stack
/// cluster (issue 35).
pub(crate) const IPV6_THROUGHPUT: f64 = 0.95;
/// A pod's connection rate to a ClusterIP over IPv6 against IPv4, the
/// same Service's two frontends (issue 35).
pub(crate) const IPV6_CONN_RATE: f64 = 0.95;
/// Connection rate against iptables DNAT at `SERVICES_AT_SCALE` services.
pub(crate) const SERVICES_SCALE_CONN_RATE: f64 = 3.0;
pub(crate) const SERVICES_AT_SCALE: usize = 20_000;
pub(crate) const EVENTS_LOSSLESS: f64 = 0.9;
/// Throughput with every packet traced against aggregation medium.
pub(crate) const TRACE_ALL_THROUGHPUT: f64 = 0.8;
/// Policy enforcement's per-packet cost (not a row of issue 34's table;
/// the target issue 12 set).
pub(crate) const ENFORCEMENT_THROUGHPUT: f64 = 0.9;
/// The operator's CIDR for one node against kube-controller-manager's:
/// at most this ratio.
pub(crate) const OPERATOR_CIDR_RATIO: f64 = 1.0;
/// Real nodes and Kubernetes' endpoints test against the bridge plugin and
/// kube-proxy: at most this ratio at p50.
pub(crate) const REAL_NODE_RATIO: f64 = 1.05;

/// Absolute ceilings, in ms or MB.
pub(crate) const POD_ADD_P50_MS: f64 = 3.0;
pub(crate) const RSS_IDLE_MB: f64 = 14.0;
pub(crate) const RSS_LOADED_MB: f64 = 25.0;
pub(crate) const POLICY_1000_P50_MS: f64 = 20.0;
pub(crate) const K8S_SERVICE_P99_MS: f64 = 50.0;
pub(crate) const K8S_POD_CEP_P50_MS: f64 = 30.0;
pub(crate) const START_TO_READY_MS: f64 = 150.0;

struct Row {
    figure: String,
    measured: String,
    goal: String,
    met: bool,
}

static ROWS: Mutex<Vec<Row>> = Mutex::new(Vec::new());

fn verdict(met: bool) -> &'static str {
    if met {
        "PASS"
    } else {
        "MISS"
    }
}

fn record(figure: &str, measured: String, goal: String, met: bool) -> &'static str {
    let row = Row {
        figure: figure.to_owned(),
        measured,
        goal,
        met,
    };
    ROWS.lock().unwrap_or_else(|e| e.into_inner()).push(row);
    verdict(met)
}

/// A ratio that must reach `goal`; returns "goal >= …x: PASS|MISS".
pub(crate) fn at_least(figure: &str, ratio: f64, goal: f64) -> String {
    let v = record(
        figure,
        format!("{ratio:.2}x"),
        format!(">= {goal}x"),
        ratio >= goal,
    );
    format!("goal >= {goal}x: {v}")
}

/// A ratio that must stay at or under `goal`.
pub(crate) fn at_most(figure: &str, ratio: f64, goal: f64) -> String {
    let v = record(
        figure,
        format!("{ratio:.2}x"),
        format!("<= {goal}x"),
        ratio <= goal,
    );
    format!("goal <= {goal}x: {v}")
}

/// A measure in `unit` that must stay under `goal`.
pub(crate) fn under(figure: &str, value: f64, goal: f64, unit: &str) -> String {
    let v = record(
        figure,
        format!("{value:.1} {unit}"),
        format!("< {goal} {unit}"),
        value < goal,
    );
    format!("goal < {goal} {unit}: {v}")
}

/// A condition without a number (no packet lost, ...).
pub(crate) fn holds(figure: &str, measured: String, goal: &str, met: bool) -> String {
    let v = record(figure, measured, goal.to_owned(), met);
    format!("goal {goal}: {v}")
}

/// A section that stopped with `error`: whatever rows it had not reached
/// are missing from the table, and this row says why.
pub(crate) fn failed(section: &str, error: &anyhow::Error) {
    // the first line of the cause chain, without table-breaking pipes
    let why = format!("{error:#}")
        .lines()
        .next()
        .unwrap_or("")
        .replace('|', "/");
    record(
        &format!("section {section} ran to its end"),
        format!("failed: {why}"),
        "runs".into(),
        false,
    );
}

/// The run's verdicts as a Markdown table (docs/benchmarks.md keeps the
/// last full run's), and how many goals were missed.
pub(crate) fn table() -> (String, usize) {
    let rows = ROWS.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = String::from("| figure | measured | goal | verdict |\n|---|---|---|---|\n");
    for r in rows.iter() {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.figure,
            r.measured,
            r.goal,
            verdict(r.met)
        ));
    }
    (out, rows.iter().filter(|r| !r.met).count())
}
