//! What the operator's tests share: a real API server with the CRDs in
//! a sandbox, and operator replicas started as the operator's
//! ServiceAccount, each with its own health port and log.

#![allow(dead_code)] // each test file uses its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use testsupport::kube;
use testsupport::Sandbox;

/// Short election timing, so a takeover is quick to see.
pub const LEASE: Duration = Duration::from_secs(4);

pub struct Cluster {
    pub sb: Sandbox,
    pub cp: kubeplane::ControlPlane,
    pub kubeconfig: PathBuf,
}

impl Cluster {
    pub fn start() -> Self {
        let mut sb = Sandbox::enter();
        let (cp, _) = kube::start(&mut sb);
        kube::apply_crds(&cp);
        let kubeconfig = kube::operator_kubeconfig(&cp);
        Self { sb, cp, kubeconfig }
    }

    pub fn log(&self, replica: usize) -> PathBuf {
        self.sb.path().join(format!("operator-{replica}.log"))
    }

    /// Starts replica `replica` (its own health port and log); its index
    /// among the sandbox's children.
    pub fn operator(&mut self, replica: usize, pool: &str, mask: u8) -> usize {
        self.operator_with(
            replica,
            &[
                format!("--cluster-pool-ipv4-cidr={pool}"),
                format!("--cluster-pool-ipv4-mask-size={mask}"),
            ],
        )
    }

    /// Starts replica `replica` with `args` besides the connection and
    /// the short election timing.
    pub fn operator_with(&mut self, replica: usize, args: &[String]) -> usize {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log(replica))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_cilium-operator"))
            .args([
                format!("--k8s-kubeconfig-path={}", self.kubeconfig.display()),
                format!("--operator-api-serve-addr=127.0.0.1:{}", 9233 + replica),
                "--leader-election-lease-duration=4s".into(),
                "--leader-election-renew-deadline=3s".into(),
                "--leader-election-retry-period=1s".into(),
            ])
            .args(args)
            .env("CILIUM_K8S_NAMESPACE", "kube-system")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start cilium-operator");
        self.sb.adopt(child)
    }

    pub fn kill(&mut self, child: usize) {
        let c = self.sb.child(child);
        c.kill().unwrap();
        c.wait().unwrap();
    }

    pub fn kubectl(&self, args: &[&str]) -> String {
        kube::kubectl_ok(&self.cp, args)
    }

    pub fn holder(&self) -> String {
        let mut cmd = self.cp.kubectl();
        cmd.args([
            "get",
            "lease",
            "-n",
            "kube-system",
            "cilium-operator-resource-lock",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ]);
        out_of(cmd).trim().to_owned()
    }

    pub fn add_nodes(&self, names: &[String]) {
        let items: Vec<String> = names
            .iter()
            .map(|n| {
                format!(r#"{{"apiVersion":"cilium.io/v2","kind":"CiliumNode","metadata":{{"name":"{n}"}},"spec":{{"addresses":[]}}}}"#)
            })
            .collect();
        kube::apply(
            &self.cp,
            &format!(
                r#"{{"apiVersion":"v1","kind":"List","items":[{}]}}"#,
                items.join(",")
            ),
        );
    }

    pub fn delete_nodes(&self, names: &[String]) {
        let mut args = vec!["delete", "ciliumnode"];
        args.extend(names.iter().map(String::as_str));
        self.kubectl(&args);
    }

    /// Every CiliumNode and its pod CIDRs.
    pub fn cidrs(&self) -> Vec<(String, Vec<String>)> {
        let json: serde_json::Value =
            serde_json::from_str(&self.kubectl(&["get", "ciliumnodes", "-o", "json"])).unwrap();
        json["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                let cidrs = n["spec"]["ipam"]["podCIDRs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.as_str().map(str::to_owned))
                    .collect();
                (n["metadata"]["name"].as_str().unwrap().to_owned(), cidrs)
            })
            .collect()
    }
}

pub fn out_of(mut cmd: Command) -> String {
    let out = cmd.output().expect("run kubectl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The last lines of a log, for a failure message.
pub fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
