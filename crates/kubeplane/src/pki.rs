//! The cluster's certificates, made here so the lab needs no other tool:
//! a CA; signed by it, the API server's serving certificate and a client
//! certificate per user (its common name is the user, its organizations
//! the groups, as the API server reads them); and the key pair
//! service-account tokens are signed with; and, as kubeadm makes them, a
//! second CA for the front proxy with the one client it signs, which the
//! API server presents to aggregated API servers (their requestheader
//! authentication trusts that CA alone). Everything is PEM in one
//! directory, keys readable by their owner only.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use std::net::IpAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A CA: the stem of its files (`<file>.crt`, `<file>.key`) and its
/// common name, which the certificates it signs name as their issuer.
struct Ca {
    file: &'static str,
    name: &'static str,
}

const CLUSTER_CA: Ca = Ca {
    file: "ca",
    name: "cilium-lab-ca",
};
/// The front proxy's CA and client, kubeadm's names.
const FRONT_PROXY_CA: Ca = Ca {
    file: "front-proxy-ca",
    name: "front-proxy-ca",
};
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

/// The names the API server answers to inside the cluster.
const APISERVER_NAMES: &[&str] = &[
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "localhost",
];

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("making {what}: {source}")]
    Generate { what: String, source: rcgen::Error },
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A certificate and its key, as files.
#[derive(Clone, Debug)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The PKI of one cluster, in `dir`.
#[derive(Clone, Debug)]
pub struct Pki {
    dir: PathBuf,
}

fn generated(what: &str) -> impl FnOnce(rcgen::Error) -> PkiError + '_ {
    move |source| PkiError::Generate {
        what: what.to_owned(),
        source,
    }
}

fn write(path: PathBuf, body: &str, private: bool) -> Result<PathBuf, PkiError> {
    let err = |source| PkiError::Write {
        path: path.clone(),
        source,
    };
    std::fs::write(&path, body).map_err(err)?;
    if private {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    }
    Ok(path)
}

fn ca_params(name: &str) -> Result<CertificateParams, PkiError> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(generated("the CA"))?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

impl Pki {
    /// A new CA, the API server's certificate for `addresses` (and the
    /// in-cluster names and first service address the caller includes),
    /// and the service-account key pair, written to `dir`.
    pub fn create(dir: &Path, addresses: &[IpAddr]) -> Result<Self, PkiError> {
        std::fs::create_dir_all(dir).map_err(|source| PkiError::Write {
            path: dir.to_owned(),
            source,
        })?;
        let pki = Self {
            dir: dir.to_owned(),
        };
        for ca in [CLUSTER_CA, FRONT_PROXY_CA] {
            let key = KeyPair::generate().map_err(generated("a CA key"))?;
            let cert = ca_params(ca.name)?
                .self_signed(&key)
                .map_err(generated("a CA"))?;
            write(dir.join(format!("{}.crt", ca.file)), &cert.pem(), false)?;
            write(
                dir.join(format!("{}.key", ca.file)),
                &key.serialize_pem(),
                true,
            )?;
        }

        let mut names: Vec<String> = APISERVER_NAMES.iter().map(|n| n.to_string()).collect();
        names.sort();
        let mut serving =
            CertificateParams::new(names).map_err(generated("the API server's certificate"))?;
        serving
            .subject_alt_names
            .extend(addresses.iter().map(|ip| SanType::IpAddress(*ip)));
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        pki.issue(&CLUSTER_CA, "apiserver", serving)?;
        let mut front_proxy = CertificateParams::new(Vec::<String>::new())
            .map_err(generated("the front proxy's client certificate"))?;
        front_proxy
            .distinguished_name
            .push(DnType::CommonName, FRONT_PROXY_CLIENT);
        front_proxy.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        pki.issue(&FRONT_PROXY_CA, FRONT_PROXY_CLIENT, front_proxy)?;

        let sa = KeyPair::generate().map_err(generated("the service-account key"))?;
        write(pki.sa_key(), &sa.serialize_pem(), true)?;
        write(pki.sa_pub(), &sa.public_key_pem(), false)?;
        Ok(pki)
    }

    /// The PKI a previous `create` left in `dir`.
    pub fn open(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn ca_cert(&self) -> PathBuf {
        self.dir.join(format!("{}.crt", CLUSTER_CA.file))
    }

    /// The CA aggregated API servers trust the front proxy's client by.
    pub fn front_proxy_ca_cert(&self) -> PathBuf {
        self.dir.join(format!("{}.crt", FRONT_PROXY_CA.file))
    }

    /// The client certificate the API server proxies to aggregated API
    /// servers with.
    pub fn front_proxy_client(&self) -> CertFiles {
        self.files(FRONT_PROXY_CLIENT)
    }

    /// The API server's serving certificate.
    pub fn serving(&self) -> CertFiles {
        self.files("apiserver")
    }

    /// The key service-account tokens are signed with.
    pub fn sa_key(&self) -> PathBuf {
        self.dir.join("sa.key")
    }

    pub fn sa_pub(&self) -> PathBuf {
        self.dir.join("sa.pub")
    }

    /// Where `name`'s certificate and key are (made or not).
    pub fn files(&self, name: &str) -> CertFiles {
        CertFiles {
            cert: self.dir.join(format!("{name}.crt")),
            key: self.dir.join(format!("{name}.key")),
        }
    }

    /// A client certificate for `user` in `groups`, stored as `<name>.crt`
    /// and `<name>.key`; made once, the files reused after.
    pub fn client(&self, name: &str, user: &str, groups: &[&str]) -> Result<CertFiles, PkiError> {
        let files = self.files(name);
        if files.cert.exists() && files.key.exists() {
            return Ok(files);
        }
        let mut params = CertificateParams::new(Vec::<String>::new())
            .map_err(generated("a client certificate"))?;
        params.distinguished_name.push(DnType::CommonName, user);
        for group in groups {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *group);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(&CLUSTER_CA, name, params)
    }

    /// Signs `params` with `ca`; writes `<name>.crt` and `<name>.key`.
    fn issue(
        &self,
        ca: &Ca,
        name: &str,
        mut params: CertificateParams,
    ) -> Result<CertFiles, PkiError> {
        let ca_key_path = self.dir.join(format!("{}.key", ca.file));
        let ca_pem = std::fs::read_to_string(&ca_key_path).map_err(|source| PkiError::Read {
            path: ca_key_path,
            source,
        })?;
        let ca_key = KeyPair::from_pem(&ca_pem).map_err(generated("the CA key"))?;
        let issuer = Issuer::new(ca_params(ca.name)?, ca_key);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate().map_err(generated(name))?;
        let cert = params.signed_by(&key, &issuer).map_err(generated(name))?;
        let files = self.files(name);
        write(files.cert.clone(), &cert.pem(), false)?;
        write(files.key.clone(), &key.serialize_pem(), true)?;
        Ok(files)
    }
}

/// Hubble's CA, apart from the cluster's as Cilium's chart keeps it.
const HUBBLE_CA: Ca = Ca {
    file: "hubble-ca",
    name: "hubble-ca.cilium.io",
};

/// Hubble's certificates as Cilium's chart makes them: a CA of its own,
/// the server certificate every agent presents on its Hubble port (one
/// name for every node of the cluster: `*.<cluster>.hubble-grpc.cilium.io`)
/// and Relay's client certificate (`*.hubble-relay.cilium.io`), each
/// usable both ways as Cilium's certgen makes them.
#[derive(Clone, Debug)]
pub struct HubblePki {
    pki: Pki,
}

impl HubblePki {
    /// Made in `dir` for `cluster` (`default` unless named), or what an
    /// earlier call made there.
    pub fn create(dir: &Path, cluster: &str) -> Result<Self, PkiError> {
        std::fs::create_dir_all(dir).map_err(|source| PkiError::Write {
            path: dir.to_owned(),
            source,
        })?;
        let hubble = Self {
            pki: Pki::open(dir),
        };
        if hubble.relay_client().key.exists() {
            return Ok(hubble);
        }
        let key = KeyPair::generate().map_err(generated("the Hubble CA key"))?;
        let cert = ca_params(HUBBLE_CA.name)?
            .self_signed(&key)
            .map_err(generated("the Hubble CA"))?;
        write(hubble.ca_cert(), &cert.pem(), false)?;
        write(
            dir.join(format!("{}.key", HUBBLE_CA.file)),
            &key.serialize_pem(),
            true,
        )?;
        for (file, name) in [
            (
                "hubble-server",
                format!("*.{cluster}.hubble-grpc.cilium.io"),
            ),
            ("hubble-relay-client", "*.hubble-relay.cilium.io".to_owned()),
        ] {
            let mut params = CertificateParams::new(vec![name.clone()])
                .map_err(generated("a Hubble certificate"))?;
            params.distinguished_name.push(DnType::CommonName, name);
            params.extended_key_usages = vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ];
            hubble.pki.issue(&HUBBLE_CA, file, params)?;
        }
        Ok(hubble)
    }

    pub fn ca_cert(&self) -> PathBuf {
        self.pki.dir.join(format!("{}.crt", HUBBLE_CA.file))
    }

    /// What every agent serves Hubble with.
    pub fn server(&self) -> CertFiles {
        self.pki.files("hubble-server")
    }

    /// What Relay dials the agents with.
    pub fn relay_client(&self) -> CertFiles {
        self.pki.files("hubble-relay-client")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_pki_is_written_and_clients_are_issued_once() {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::create(dir.path(), &["198.18.0.1".parse().unwrap()]).unwrap();
        for f in [
            pki.ca_cert(),
            pki.serving().cert,
            pki.serving().key,
            pki.sa_key(),
            pki.sa_pub(),
        ] {
            assert!(
                std::fs::read_to_string(&f)
                    .unwrap()
                    .starts_with("-----BEGIN"),
                "{}",
                f.display()
            );
        }
        let mode = std::fs::metadata(pki.sa_key())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "private keys are the owner's");
        let admin = pki
            .client("admin", "kubernetes-admin", &["system:masters"])
            .unwrap();
        let first = std::fs::read_to_string(&admin.cert).unwrap();
        let again = pki
            .client("admin", "kubernetes-admin", &["system:masters"])
            .unwrap();
        assert_eq!(std::fs::read_to_string(&again.cert).unwrap(), first);
    }

    #[test]
    fn hubble_has_its_own_ca_and_is_made_once() {
        let dir = tempfile::tempdir().unwrap();
        let hubble = HubblePki::create(dir.path(), "default").unwrap();
        let server = std::fs::read_to_string(hubble.server().cert).unwrap();
        let again = HubblePki::create(dir.path(), "default").unwrap();
        assert_eq!(
            std::fs::read_to_string(again.server().cert).unwrap(),
            server
        );
        for f in [hubble.ca_cert(), hubble.relay_client().cert] {
            assert!(std::fs::read_to_string(&f)
                .unwrap()
                .starts_with("-----BEGIN"));
        }
    }
}
