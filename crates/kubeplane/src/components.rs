//! The control plane's processes: kube-apiserver on one address with RBAC
//! and a service-account issuer, kube-controller-manager (node IPAM on,
//! so Nodes get pod CIDRs) and kube-scheduler, each with a kubeconfig of
//! its own user, and kubectl as the cluster admin.

use crate::bins::Binaries;
use crate::kubeconfig::{self, Credentials};
use crate::pki::{Pki, PkiError};
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The addressing the control plane hands out.
#[derive(Clone, Debug)]
pub struct Ranges {
    /// ClusterIPs (`--service-cluster-ip-range`): an IPv4 range, then an
    /// IPv6 one for dual-stack Services. Single-stack Services take the
    /// first family, as kubeadm's dual-stack clusters.
    pub services: String,
    /// The first ClusterIP: the `kubernetes` Service's.
    pub first_service_ip: IpAddr,
    /// What node IPAM cuts pod CIDRs from (`--cluster-cidr`).
    pub pods: String,
    /// The size of each node's pod CIDR.
    pub node_mask: u8,
}

impl Default for Ranges {
    fn default() -> Self {
        Self {
            // the IPv6 range: 2^20 addresses (a /108), the most API servers
            // before MultiCIDRServiceAllocator took; 1.34 takes wider ones
            // but draws an address below a /64 or wider (a random uint64
            // offset added as int64). Beside the IPv6 pod pool fd00::/104.
            services: "10.96.0.0/12,fd00:96::/108".into(),
            first_service_ip: Ipv4Addr::new(10, 96, 0, 1).into(),
            pods: "10.0.0.0/8".into(),
            node_mask: 24,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the API server at {server} was not ready within {waited:?}: {last}")]
    NotReady {
        server: String,
        waited: Duration,
        last: String,
    },
}

/// One cluster's control plane, laid out in `dir`.
#[derive(Clone, Debug)]
pub struct ControlPlane {
    pub bins: Binaries,
    pub pki: Pki,
    pub dir: PathBuf,
    /// Where the API server listens and what it advertises (of the first
    /// service range's family).
    pub address: IpAddr,
    pub port: u16,
    /// etcd's client URL.
    pub etcd: String,
    pub ranges: Ranges,
}

/// The components' users and groups, as Kubernetes' default RBAC knows them.
const USERS: &[(&str, &str, &[&str])] = &[
    ("admin", "kubernetes-admin", &["system:masters"]),
    (
        "kube-controller-manager",
        "system:kube-controller-manager",
        &[],
    ),
    ("kube-scheduler", "system:kube-scheduler", &[]),
];

/// The API server's client certificate towards kubelets (logs, exec,
/// port-forward), as kubeadm names it; in `system:masters`, so kubelets
/// that ask the API server (authorization mode Webhook) let it in.
const KUBELET_CLIENT: (&str, &str, &[&str]) = (
    "apiserver-kubelet-client",
    "kube-apiserver-kubelet-client",
    &["system:masters"],
);

impl ControlPlane {
    /// Makes the PKI and the components' kubeconfigs in `dir`.
    pub fn create(
        bins: Binaries,
        dir: &Path,
        address: IpAddr,
        port: u16,
        etcd: &str,
        ranges: Ranges,
    ) -> Result<Self, ControlPlaneError> {
        let sans = [
            address,
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            ranges.first_service_ip,
        ];
        Pki::create(&dir.join("pki"), &sans)?;
        let cp = Self::open(bins, dir, address, port, etcd, ranges);
        for (name, user, groups) in USERS {
            cp.write_client_kubeconfig(name, user, groups)?;
        }
        let (name, user, groups) = KUBELET_CLIENT;
        cp.pki.client(name, user, groups)?;
        Ok(cp)
    }

    /// The control plane `create` laid out in `dir` before (the PKI and
    /// kubeconfigs are read from there, not made again).
    pub fn open(
        bins: Binaries,
        dir: &Path,
        address: IpAddr,
        port: u16,
        etcd: &str,
        ranges: Ranges,
    ) -> Self {
        Self {
            bins,
            pki: Pki::open(&dir.join("pki")),
            dir: dir.to_owned(),
            address,
            port,
            etcd: etcd.to_owned(),
            ranges,
        }
    }

    /// `https://<address>:<port>` (an IPv6 address in brackets).
    pub fn server(&self) -> String {
        format!(
            "https://{}",
            std::net::SocketAddr::new(self.address, self.port)
        )
    }

    pub fn kubeconfig(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.kubeconfig"))
    }

    /// The cluster admin's kubeconfig (what `kubectl` here uses).
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.kubeconfig("admin")
    }

    /// A client certificate for `user` in `groups` (`<name>.crt`, made
    /// once) and the kubeconfig `<name>` that uses it; the kubeconfig's path.
    pub fn write_client_kubeconfig(
        &self,
        name: &str,
        user: &str,
        groups: &[&str],
    ) -> Result<PathBuf, ControlPlaneError> {
        let files = self.pki.client(name, user, groups)?;
        let creds = Credentials::Cert {
            cert: &files.cert,
            key: &files.key,
        };
        self.write_kubeconfig(name, user, &creds)
    }

    /// Writes `<name>.kubeconfig` for `user` with `creds`.
    pub fn write_kubeconfig(
        &self,
        name: &str,
        user: &str,
        creds: &Credentials<'_>,
    ) -> Result<PathBuf, ControlPlaneError> {
        let path = self.kubeconfig(name);
        kubeconfig::write(&path, &self.server(), &self.pki.ca_cert(), user, creds).map_err(
            |source| ControlPlaneError::Write {
                path: path.clone(),
                source,
            },
        )
    }

    /// The kubectl arguments that mint a day's token for ServiceAccount
    /// `namespace/name`.
    pub fn token_args(namespace: &str, name: &str) -> Vec<String> {
        ["create", "token", name, "-n", namespace, "--duration=24h"]
            .iter()
            .map(|a| a.to_string())
            .collect()
    }

    /// A kubeconfig for ServiceAccount `namespace/name` with `token` in a
    /// file beside it, as the projected token of a pod.
    pub fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
        token: &str,
    ) -> Result<PathBuf, ControlPlaneError> {
        let file = self.dir.join(format!("{name}.token"));
        std::fs::write(&file, token.trim()).map_err(|source| ControlPlaneError::Write {
            path: file.clone(),
            source,
        })?;
        let user = format!("system:serviceaccount:{namespace}:{name}");
        self.write_kubeconfig(name, &user, &Credentials::TokenFile(&file))
    }

    /// A component's command, appending to `<dir>/<name>.log`.
    fn logged(&self, bin: &Path, name: &str) -> Command {
        let mut cmd = Command::new(bin);
        // appended to: a component restarted by its supervisor keeps the
        // reason it died before
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{name}.log")));
        match log.and_then(|f| Ok((f.try_clone()?, f))) {
            Ok((out, err)) => {
                cmd.stdout(out).stderr(err);
            }
            Err(_) => {
                cmd.stdout(Stdio::null()).stderr(Stdio::null());
            }
        }
        cmd
    }

    pub fn apiserver(&self) -> Command {
        let pki = &self.pki;
        let serving = pki.serving();
        let kubelet_client = pki.files(KUBELET_CLIENT.0);
        let front_proxy = pki.front_proxy_client();
        let mut cmd = self.logged(&self.bins.apiserver, "kube-apiserver");
        cmd.arg(format!("--etcd-servers={}", self.etcd))
            .arg(format!("--bind-address={}", self.address))
            .arg(format!("--advertise-address={}", self.address))
            .arg(format!("--secure-port={}", self.port))
            .arg(format!("--tls-cert-file={}", serving.cert.display()))
            .arg(format!("--tls-private-key-file={}", serving.key.display()))
            .arg(format!("--client-ca-file={}", pki.ca_cert().display()))
            .arg(format!(
                "--service-account-key-file={}",
                pki.sa_pub().display()
            ))
            .arg(format!(
                "--service-account-signing-key-file={}",
                pki.sa_key().display()
            ))
            .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
            .arg(format!(
                "--service-cluster-ip-range={}",
                self.ranges.services
            ))
            .arg("--authorization-mode=Node,RBAC")
            // the front proxy, as kubeadm sets it up: the API server
            // proxies to aggregated API servers with this client, and
            // publishes the CA and headers they authenticate it by
            .arg(format!(
                "--requestheader-client-ca-file={}",
                pki.front_proxy_ca_cert().display()
            ))
            .arg(format!(
                "--requestheader-allowed-names={}",
                crate::pki::FRONT_PROXY_CLIENT
            ))
            .arg("--requestheader-username-headers=X-Remote-User")
            .arg("--requestheader-group-headers=X-Remote-Group")
            .arg("--requestheader-extra-headers-prefix=X-Remote-Extra-")
            .arg(format!(
                "--proxy-client-cert-file={}",
                front_proxy.cert.display()
            ))
            .arg(format!(
                "--proxy-client-key-file={}",
                front_proxy.key.display()
            ))
            .arg("--enable-admission-plugins=NodeRestriction")
            .arg("--allow-privileged=true")
            // The API server runs beside the nodes, not on one: no agent's
            // socket LB translates its connects, so it reaches webhooks and
            // aggregated APIs at their endpoints (pod addresses routed
            // through the nodes), as control planes outside the cluster's
            // datapath do, instead of at ClusterIPs nothing serves there.
            .arg("--enable-aggregator-routing=true")
            // kubelets are reached at their node IP, never by name: the
            // machine's resolver knows no node
            .arg("--kubelet-preferred-address-types=InternalIP")
            .arg(format!(
                "--kubelet-client-certificate={}",
                kubelet_client.cert.display()
            ))
            .arg(format!(
                "--kubelet-client-key={}",
                kubelet_client.key.display()
            ))
            .arg(format!(
                "--cert-dir={}",
                self.dir.join("apiserver-certs").display()
            ))
            .arg("--profiling=false");
        cmd
    }

    /// Arguments the controller manager and the scheduler share: their
    /// kubeconfig for everything, serving on loopback, no leader election
    /// (one of each).
    fn component_args(&self, cmd: &mut Command, name: &str) {
        let kubeconfig = self.kubeconfig(name);
        cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!(
                "--authentication-kubeconfig={}",
                kubeconfig.display()
            ))
            .arg(format!(
                "--authorization-kubeconfig={}",
                kubeconfig.display()
            ))
            .arg("--bind-address=127.0.0.1")
            .arg("--leader-elect=false")
            .arg("--profiling=false");
    }

    pub fn controller_manager(&self) -> Command {
        let name = "kube-controller-manager";
        let mut cmd = self.logged(&self.bins.controller_manager, name);
        self.component_args(&mut cmd, name);
        cmd.arg("--controllers=*")
            .arg("--allocate-node-cidrs=true")
            .arg(format!("--cluster-cidr={}", self.ranges.pods))
            .arg(format!("--node-cidr-mask-size={}", self.ranges.node_mask))
            .arg(format!(
                "--service-cluster-ip-range={}",
                self.ranges.services
            ))
            .arg(format!(
                "--service-account-private-key-file={}",
                self.pki.sa_key().display()
            ))
            .arg(format!("--root-ca-file={}", self.pki.ca_cert().display()))
            .arg("--use-service-account-credentials=true");
        cmd
    }

    pub fn scheduler(&self) -> Command {
        let name = "kube-scheduler";
        let mut cmd = self.logged(&self.bins.scheduler, name);
        self.component_args(&mut cmd, name);
        cmd
    }

    /// kubectl as the cluster admin.
    pub fn kubectl(&self) -> Command {
        let mut cmd = Command::new(&self.bins.kubectl);
        cmd.arg(format!(
            "--kubeconfig={}",
            self.admin_kubeconfig().display()
        ));
        cmd
    }

    /// Waits until the API server says it is ready (`/readyz`).
    pub fn wait_ready(&self, timeout: Duration) -> Result<(), ControlPlaneError> {
        let started = Instant::now();
        let mut last = String::from("not tried");
        while started.elapsed() < timeout {
            match self.kubectl().args(["get", "--raw", "/readyz"]).output() {
                Ok(out) if out.status.success() => return Ok(()),
                Ok(out) => last = String::from_utf8_lossy(&out.stderr).trim().to_owned(),
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(ControlPlaneError::NotReady {
            server: self.server(),
            waited: timeout,
            last,
        })
    }
}
